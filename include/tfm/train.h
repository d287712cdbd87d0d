// Training from a YAML recipe into a run directory (docs/TRAINING.md), as `tfm train` does:
// vocabulary, checkpoints, validation, metrics, resuming.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tfm {

struct TrainingOptions {
  std::filesystem::path recipe;        // the YAML recipe; empty: the defaults
  std::vector<std::string> overrides;  // "section.key=value", as `tfm train --set`
  std::filesystem::path run_dir;       // empty: the recipe's training.run_dir
  int64_t max_steps = -1;              // >= 0: stop after this many updates
  double max_minutes = -1;             // >= 0: stop after this many minutes
  int threads = -1;                    // >= 0: the recipe's training.threads (0: all cores)
  bool resume = false;                 // continue from the run directory's newest checkpoint
  std::string device;                  // "cpu" | "cuda"; empty: the recipe's training.device
};

struct TrainingResult {
  int64_t steps = 0;
  double elapsed_seconds = 0;
  double last_valid_loss = 0;
  double last_valid_bleu = -1;            // -1: not computed
  bool interrupted = false;               // stopped by a signal; resume to continue
  std::filesystem::path last_checkpoint;  // a model directory (Model::load reads it)
};

TrainingResult train(const TrainingOptions& options);

}  // namespace tfm
