// `tfm train`: the whole run from a recipe. Learns (or loads) the vocabulary, reads and caches the
// corpora, trains with periodic progress lines, validation, metrics (JSON lines) and atomic
// checkpoints, stops at the recipe's step, epoch or time limit, and resumes exactly from the last
// checkpoint after an interruption (Ctrl-C or SIGTERM save a checkpoint before exiting).
// run_training is a train/training_run.h TrainingRun, whose parts are tested one by one.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tfm/dist/communicator.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {

namespace data {
class Vocabulary;
}
namespace nn {
class Transformer;
}

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs_completed = 0;
  double elapsed_seconds = 0;
  double last_valid_loss = 0;
  double last_valid_bleu = -1;  // -1: not computed
  bool interrupted = false;
  int64_t skipped_updates = 0;  // updates skipped for a non-finite loss or gradient norm
  std::string last_checkpoint;
};

// BLEU of the model's translations of the validation sources (raw sentences) against the
// references. Supplied by the caller (the CLI), since decoding and BLEU sit above training.
using ValidationBleu = std::function<double(const nn::Transformer&, const data::Vocabulary&,
                                            const std::vector<std::string>& sources,
                                            const std::vector<std::string>& references)>;

struct TrainRunOptions {
  bool resume = false;  // continue from the newest checkpoint of the run directory
  ValidationBleu bleu;  // for validation.bleu; without it validation reports loss only
  // The job's ranks (nullptr: this process alone). With several, each update's batches are shared
  // out among them and rank 0 alone logs, validates and writes the run directory
  // (docs/DISTRIBUTED.md).
  dist::Communicator* communicator = nullptr;
  // Receives every record written to metrics.jsonl ("train", "valid", "skipped"; rank 0 only), on
  // the training thread, after it is written.
  std::function<void(const nlohmann::json&)> on_record;
};

TrainSummary run_training(const TrainRecipe& recipe, const TrainRunOptions& options);

}  // namespace tfm::internal
