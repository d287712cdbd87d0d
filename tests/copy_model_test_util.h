// A model whose n-best lists are worth choosing from by minimum Bayes risk (tfm translate --mbr,
// tfm serve's "mbr"): trained by `tfm train` for 400 updates to copy its input, far enough that its
// hypotheses share words, not so far that they agree with its best.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data_test_util.h"

namespace tfm::internal::testing {

// A 1-layer model (d_model 32) trained to copy 300 generated sentences, in `dir`; its newest
// checkpoint.
inline std::filesystem::path train_copying_model(const TempDir& dir) {
  const std::string text = joined_lines(generated_sentences(300, false, 11));
  write_text(dir / "en.txt", text);
  write_text(dir / "de.txt", text);
  write_text(dir / "recipe.yaml",
             fmt::format("model:\n  layers: 1\n  d_model: 32\n  d_ff: 64\n  heads: 2\n  d_k: 16\n"
                         "  d_v: 16\n  max_positions: 64\ndata:\n  train_source: {}\n  "
                         "train_target: {}\n  vocab_size: 120\n  max_tokens: 400\noptimizer:\n  "
                         "warmup: 4\ntraining:\n  threads: 1\n",
                         (dir / "en.txt").string(), (dir / "de.txt").string()));
  const CommandResult run =
      run_tfm_command(fmt::format("train -c {} --run-dir {} --max-steps 400",
                                  quoted(dir / "recipe.yaml"), quoted(dir / "run")),
                      dir);
  EXPECT_EQ(run.status, 0) << run.err;
  return dir / "run" / "checkpoints" / "step-000000400";
}

}  // namespace tfm::internal::testing
