// A whole training run in this process (run_training, train/training_run.h): a run stopped and
// resumed writes the checkpoint an uninterrupted run writes, byte for byte, and hands every
// metrics record on. (bench/train_identity.sh compares what two builds write.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/recipe.h"
#include "tfm/train/train_loop.h"
#include "train_test_util.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::TempDir;

TrainSummary train(const TempDir& dir, const std::string& run, int64_t steps, bool resume,
                   std::vector<nlohmann::json>* records = nullptr) {
  TrainRecipe recipe = load_recipe(dir / "recipe.yaml");
  recipe.run_dir = (dir / run).string();
  recipe.max_steps = steps;
  TrainRunOptions options;
  options.resume = resume;
  if (records) options.on_record = [records](const nlohmann::json& r) { records->push_back(r); };
  return run_training(recipe, options);
}

nlohmann::json state_without_time(const fs::path& checkpoint) {
  nlohmann::json state = nlohmann::json::parse(read_text(checkpoint / "state.json"));
  state["extra"].erase("elapsed_s");
  state.erase("crc32");
  return state;
}

TEST(TrainRunIdentity, AResumedRunWritesTheCheckpointOfAnUninterruptedOne) {
  TempDir dir;
  testing::write_recipe(dir);
  std::vector<nlohmann::json> records;
  const TrainSummary whole = train(dir, "whole", 6, false, &records);
  EXPECT_EQ(whole.steps, 6);
  EXPECT_FALSE(whole.interrupted);
  EXPECT_EQ(fs::path(whole.last_checkpoint).filename(), "step-000000006");
  // Progress every 2 updates, validation every 4 and at the end.
  std::vector<std::string> kinds;
  for (const auto& record : records)
    kinds.push_back(
        fmt::format("{}@{}", record["type"].get<std::string>(), record["step"].get<int64_t>()));
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"train@2", "train@4", "valid@4", "train@6", "valid@6"}));

  EXPECT_EQ(train(dir, "resumed", 4, false).steps, 4);
  const TrainSummary resumed = train(dir, "resumed", 6, true);
  EXPECT_EQ(resumed.steps, 6);
  const fs::path a = dir / "whole" / "checkpoints" / "step-000000006";
  const fs::path b = dir / "resumed" / "checkpoints" / "step-000000006";
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json"})
    EXPECT_TRUE(read_text(a / file) == read_text(b / file)) << file;
  EXPECT_EQ(state_without_time(a), state_without_time(b));
  EXPECT_EQ(resumed.last_valid_loss, whole.last_valid_loss);
}

}  // namespace
}  // namespace tfm::internal
