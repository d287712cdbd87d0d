// data.word_dropout through the tfm binary: the run says it is on, trains other weights than
// without it, and a run stopped and resumed replaces the same tokens (the same weights at the end).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data_test_util.h"
#include "tfm/train/checkpoint.h"
#include "train_test_util.h"

namespace tfm::internal {
namespace {

using testing::quoted;
using testing::run_tfm_command;
using testing::TempDir;

std::string last_weights(const TempDir& dir) {
  return testing::read_text(list_checkpoints(dir / "run" / "checkpoints").back() /
                            "model.safetensors");
}

TEST(CliTrainWordDropout, ChangesTrainingAndAResumeReplacesTheSameTokens) {
  const std::string words =
      "--set data.word_dropout=0.3 --set data.word_dropout_sides=both --set checkpoints.keep=20 "
      "--set validation.bleu=false";
  TempDir dir;
  testing::write_recipe(dir);
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-steps 8 {}", quoted(dir / "recipe.yaml"), words), dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("word dropout 0.3: each training source and decoder input token"),
            std::string::npos)
      << run.err;
  const std::string uninterrupted = last_weights(dir);

  TempDir plain;
  testing::write_recipe(plain);
  auto off = run_tfm_command(fmt::format("train -c {} --max-steps 8 --set checkpoints.keep=20 "
                                         "--set validation.bleu=false",
                                         quoted(plain / "recipe.yaml")),
                             plain);
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(off.err.find("word dropout"), std::string::npos) << off.err;
  EXPECT_NE(last_weights(plain), uninterrupted);

  // Stopped at update 4 and resumed to 8: the same weights as the uninterrupted run.
  for (const auto& checkpoint : list_checkpoints(dir / "run" / "checkpoints"))
    if (load_training_state(checkpoint).step > 4) std::filesystem::remove_all(checkpoint);
  auto resumed = run_tfm_command(
      fmt::format("train -c {} --max-steps 8 --resume {}", quoted(dir / "recipe.yaml"), words),
      dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
  EXPECT_EQ(last_weights(dir), uninterrupted);
}

}  // namespace
}  // namespace tfm::internal
