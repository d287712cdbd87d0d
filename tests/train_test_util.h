// A tiny training setup for tests that run `tfm train`: 300 generated sentence pairs, a recipe of
// a 1-layer model with checkpoints every 2 updates and validation every 4.
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "data_test_util.h"

namespace tfm::internal::testing {

// Writes en.txt, de.txt and recipe.yaml (run directory `dir`/run) into `dir`.
inline void write_recipe(const TempDir& dir) {
  write_text(dir / "en.txt", joined_lines(generated_sentences(300, false, 11)));
  write_text(dir / "de.txt", joined_lines(generated_sentences(300, true, 12)));
  write_text(
      dir / "recipe.yaml",
      fmt::format("model:\n  layers: 1\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  d_k: 8\n"
                  "  d_v: 8\n  max_positions: 128\n"
                  "data:\n  train_source: {0}\n  train_target: {1}\n  valid_source: {0}\n"
                  "  valid_target: {1}\n  vocab_size: 100\n  max_tokens: 400\n"
                  "optimizer:\n  warmup: 10\n"
                  "training:\n  log_every: 2\n  threads: 1\n  run_dir: {2}\n"
                  "checkpoints:\n  every_steps: 2\n  keep: 3\n"
                  "validation:\n  every_steps: 4\n  max_sentences: 20\n",
                  (dir / "en.txt").string(), (dir / "de.txt").string(), (dir / "run").string()));
}

}  // namespace tfm::internal::testing
