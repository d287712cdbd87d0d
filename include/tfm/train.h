// Training from a YAML recipe into a run directory (docs/TRAINING.md), as `tfm train` does:
// vocabulary, checkpoints, validation, metrics, resuming.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tfm/export.h"
#include "tfm/options.h"

namespace tfm {

// What the trainer reports as it goes: the values of its log lines and of metrics.jsonl's records.
struct TrainingProgress {
  std::string kind;              // "train" (every training.log_every updates) or "valid"
  int64_t step = 0;              // updates done
  int64_t epoch = 0;             // 1-based
  double loss = 0;               // per target token, label-smoothed (train: since the last report)
  double perplexity = 0;         // exp of the per-token negative log-likelihood
  double learning_rate = 0;      // train
  double tokens_per_second = 0;  // train: source and target tokens since the last report
  double bleu = -1;              // valid with validation.bleu (a parsing model's F1); else -1
  double elapsed_seconds = 0;
};

struct TrainingOptions {
  std::filesystem::path recipe;         // the YAML recipe; empty: the defaults
  std::vector<std::string> overrides;   // "section.key=value", as `tfm train --set`
  std::filesystem::path run_dir;        // empty: the recipe's training.run_dir
  int64_t max_steps = -1;               // >= 0: stop after this many updates
  double max_minutes = -1;              // >= 0: stop after this many minutes
  int threads = -1;                     // >= 0: the recipe's training.threads (0: all cores)
  bool resume = false;                  // continue from the run directory's newest checkpoint
  std::optional<ComputeDevice> device;  // none: the recipe's training.device
  // Called on the training thread with each report. An exception it throws ends the run and
  // propagates (without a further checkpoint: the last one stays, and --resume continues from it).
  std::function<void(const TrainingProgress&)> progress;
};

struct TrainingResult {
  int64_t steps = 0;
  double elapsed_seconds = 0;
  double last_valid_loss = 0;
  double last_valid_bleu = -1;            // -1: not computed
  bool interrupted = false;               // stopped by a signal; resume to continue
  std::filesystem::path last_checkpoint;  // a model directory (Model::load reads it)
};

TFM_API TrainingResult train(const TrainingOptions& options);

}  // namespace tfm
