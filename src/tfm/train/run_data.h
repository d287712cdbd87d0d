// The data of a training run: the training corpus (read and cached by rank 0 first), the
// validation set (rank 0 alone), and the validation batches.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tfm/data/corpus.h"
#include "tfm/data/vocab.h"
#include "tfm/dist/communicator.h"
#include "tfm/model/config.h"
#include "tfm/nn/batch.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {

// How the run reads its corpora: pairs longer than the model's positions are skipped and counted,
// as over data.max_length; the encoded corpus is cached in run_dir/cache; progress through `note`.
data::CorpusOptions training_corpus_options(const TrainRecipe& recipe, const ModelConfig& config,
                                            const std::filesystem::path& run_dir,
                                            const std::function<void(const std::string&)>& note);

// The training corpus on every rank: rank 0 reads (and caches) it first; the others then find its
// cache where they share the file system.
data::Corpus load_training_corpus(const TrainRecipe& recipe, const data::Vocabulary& vocab,
                                  const data::CorpusOptions& options, dist::Communicator& comm);

struct ValidationSet {
  data::Corpus corpus;               // every pair, none skipped
  std::vector<std::string> sources;  // raw lines for BLEU, at most validation.max_sentences
  std::vector<std::string> references;
};

// data.valid_source and valid_target: the corpus (said through `note`, every pair checked against
// the model's positions) and the raw lines.
ValidationSet load_validation_set(const TrainRecipe& recipe, const data::Vocabulary& vocab,
                                  const data::CorpusOptions& options, int64_t max_positions,
                                  const std::function<void(const std::string&)>& note);

// Every validation pair must fit the model's positions (validation skips nothing): checked at
// start-up, naming the line, rather than failing at the first validation after hours of training.
void check_validation_lengths(const data::Corpus& valid, const TrainRecipe& recipe,
                              int64_t max_positions);

// The validation corpus in batches of at most `max_tokens` (at least 1), sorted by length, not
// shuffled.
std::vector<nn::Batch> validation_batches(const data::Corpus& valid, int64_t max_tokens,
                                          int32_t decoder_start = data::kBosId);

}  // namespace tfm::internal
