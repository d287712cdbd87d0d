// Where a training run starts and what it records (train/run_state.h), its batch size
// (train/run_batch_size.h) and its validation data (train/run_data.h), each alone.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/dist/communicator.h"
#include "tfm/train/run_batch_size.h"
#include "tfm/train/run_data.h"
#include "tfm/train/run_state.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

// A complete checkpoint as list_checkpoints sees it: a step folder with a state.json.
void write_state(const fs::path& run_dir, const std::string& step, const nlohmann::json& extra) {
  fs::create_directories(run_dir / "checkpoints" / step);
  testing::write_text(
      run_dir / "checkpoints" / step / "state.json",
      nlohmann::json{
          {"step", 2}, {"epoch", 0}, {"batch_in_epoch", 2}, {"seed", 1}, {"extra", extra}}
          .dump());
}

TEST(TrainRunState, TheRunDirectoryMustNotHoldCheckpointsOfAnotherRun) {
  TempDir dir;
  TrainRecipe recipe;
  recipe.run_dir = (dir / "run").string();
  auto quiet = [](const std::string&) {};
  EXPECT_FALSE(prepare_run_directory(recipe, false, quiet));  // nothing there yet
  write_state(dir / "run", "step-000000002", nlohmann::json::object());
  // A partial checkpoint a killed run left is removed, saying so.
  fs::create_directories(dir / "run" / "checkpoints" / "step-000000004.partial-123");
  std::vector<std::string> said;
  EXPECT_TRUE(
      prepare_run_directory(recipe, true, [&](const std::string& s) { said.push_back(s); }));
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("step-000000004.partial-123, left by an interrupted run"),
            std::string::npos);
  expect_error([&] { prepare_run_directory(recipe, false, quiet); },
               {"already holds checkpoints: continue it with --resume, or choose another run_dir"});
  fs::remove_all(dir / "run" / "checkpoints");
  testing::write_text(dir / "run" / "checkpoints", "a file");
  expect_error([&] { prepare_run_directory(recipe, true, quiet); },
               {"checkpoints: exists and is not a directory; the run keeps its checkpoints in "
                "this folder"});
}

TEST(TrainRunState, AResumeContinuesTheClockTheProductsAndTheFittedWarmup) {
  TrainRecipe recipe;
  TrainingState state;
  state.step = 40;
  state.extra = {{"elapsed_s", 12.5},
                 {"steps_by_products", {{"f32", 30}, {"bf16", 10}}},
                 {"fitted_warmup", 7}};
  RunStart start = run_start_from(state, recipe);
  EXPECT_EQ(start.elapsed_before, 12.5);
  EXPECT_EQ(start.first_step, 40);
  EXPECT_EQ(start.steps_by_products, (nlohmann::json{{"f32", 30}, {"bf16", 10}}));
  EXPECT_EQ(start.fitted_warmup, std::nullopt);  // optimizer.warmup_fraction is off
  recipe.warmup_fraction = 0.1;
  EXPECT_EQ(run_start_from(state, recipe).fitted_warmup, 7);
  // A checkpoint from before the products were counted.
  state.extra = nlohmann::json::object();
  start = run_start_from(state, recipe);
  EXPECT_EQ(start.elapsed_before, 0.0);
  EXPECT_EQ(start.steps_by_products, (nlohmann::json{{"unrecorded", 40}}));
  EXPECT_EQ(start.fitted_warmup, std::nullopt);
  state.step = 0;
  EXPECT_EQ(run_start_from(state, recipe).steps_by_products, nlohmann::json::object());
}

TEST(TrainRunState, ACheckpointRecordsThePositionTheBatchSizeAndTheUpdatesByProducts) {
  TrainRecipe recipe;
  recipe.seed = 9;
  recipe.max_tokens = 400;
  recipe.accumulate = 2;
  RunStart start;
  start.first_step = 40;
  start.steps_by_products = {{"f32", 40}};
  RunPosition at;
  at.step = 46;
  at.data = {3, 5};
  at.batcher_fingerprint = 1234;
  at.elapsed_seconds = 99.5;
  at.fitted_warmup = 7;
  TrainingState state = checkpoint_state(recipe, at, start, "bf16");
  EXPECT_EQ(state.step, 46);
  EXPECT_EQ(state.epoch, 3);
  EXPECT_EQ(state.batch_in_epoch, 5);
  EXPECT_EQ(state.seed, 9u);
  // fitted_warmup only while optimizer.warmup_fraction is on.
  EXPECT_EQ(state.extra.dump(),
            "{\"accumulate\":2,\"batcher_fingerprint\":1234,\"elapsed_s\":99.5,\"max_tokens\":400,"
            "\"steps_by_products\":{\"bf16\":6,\"f32\":40}}");
  recipe.warmup_fraction = 0.1;
  state = checkpoint_state(recipe, at, start, "f32");
  EXPECT_EQ(state.extra["fitted_warmup"], 7);
  EXPECT_EQ(state.extra["steps_by_products"], (nlohmann::json{{"f32", 46}}));
}

// The end of a decaying optimizer.schedule is the run's: recorded in every checkpoint and kept on
// resume (only while the recipe's schedule decays), so the same update gets the same rate.
TEST(TrainRunState, ADecayingSchedulesEndIsRecordedAndResumed) {
  TrainRecipe recipe;
  RunStart start;
  RunPosition at;
  at.step = 30;
  at.decay_end = 1166;
  EXPECT_FALSE(checkpoint_state(recipe, at, start, "f32").extra.contains("decay_end"));
  recipe.schedule = "linear";
  TrainingState state = checkpoint_state(recipe, at, start, "f32");
  EXPECT_EQ(state.extra["decay_end"], 1166);
  EXPECT_FALSE(state.extra.contains("fitted_warmup"));
  EXPECT_EQ(run_start_from(state, recipe).decay_end, 1166);
  recipe.schedule = "cosine";
  EXPECT_EQ(run_start_from(state, recipe).decay_end, 1166);
  recipe.schedule = "noam";
  EXPECT_EQ(run_start_from(state, recipe).decay_end, std::nullopt);
  recipe.schedule = "linear";
  state.extra.erase("decay_end");  // saved before a time budget's fit
  EXPECT_EQ(run_start_from(state, recipe).decay_end, std::nullopt);
}

// Where a time budget's decay was re-anchored when its end moved (NoamSchedule::decay_from) is
// recorded beside the end, so a resumed run continues the same line.
TEST(TrainRunState, ADecaysAnchorIsRecordedAndResumedWithItsEnd) {
  TrainRecipe recipe;
  recipe.schedule = "linear";
  RunStart start;
  RunPosition at;
  at.step = 300;
  at.decay_end = 1200;
  TrainingState state = checkpoint_state(recipe, at, start, "f32");
  EXPECT_FALSE(state.extra.contains("decay_from"));
  EXPECT_EQ(run_start_from(state, recipe).decay_from, std::nullopt);
  at.decay_from = 250;
  at.decay_from_progress = 0.375;
  state = checkpoint_state(recipe, at, start, "f32");
  EXPECT_EQ(state.extra["decay_from"], 250);
  EXPECT_EQ(state.extra["decay_from_progress"], 0.375);
  const RunStart resumed = run_start_from(state, recipe);
  EXPECT_EQ(resumed.decay_end, 1200);
  EXPECT_EQ(resumed.decay_from, 250);
  EXPECT_EQ(resumed.decay_from_progress, 0.375);
  recipe.schedule = "noam";  // no decay: neither is kept
  EXPECT_EQ(run_start_from(state, recipe).decay_from, std::nullopt);
}

TEST(TrainRunState, ANonFiniteParameterIsNotSaved) {
  nn::NamedTensors parameters = {{"a", Tensor::full({2}, 1.0f)},
                                 {"b", Tensor::from_floats({2}, {0.0f, std::nanf("")})}};
  expect_error([&] { check_parameters_finite(parameters, 12, ""); },
               {"step 12: parameter 'b' holds a non-finite value: not saving it; the last "
                "checkpoint is none"});
  parameters.pop_back();
  check_parameters_finite(parameters, 12, "");
}

TEST(TrainRunBatchSize, GivenNumbersAreTheRunsOnEveryRank) {
  TrainRecipe recipe;
  recipe.max_tokens = 400;
  recipe.accumulate = 3;
  auto alone = dist::make_single_process();
  std::vector<std::string> said;
  const BatchSize size =
      run_batch_size(recipe, recipe.model_config(100), Device::cpu, DType::f32, *alone, false,
                     [&](const std::string& s) { said.push_back(s); });
  EXPECT_EQ(size.max_tokens, 400);
  EXPECT_EQ(size.accumulate, 3);
  EXPECT_EQ(size.ranks, 1);
  EXPECT_TRUE(said.empty());  // nothing to say
}

TEST(TrainRunBatchSize, AResumedRunKeepsTheBatchSizeItWasTrainedWith) {
  TempDir dir;
  TrainRecipe recipe;
  recipe.run_dir = (dir / "run").string();
  recipe.max_tokens = 400;
  recipe.accumulate = kAutoBatch;
  recipe.update_tokens = 2000;  // 5 batches of 400
  recipe.max_length = 100;
  auto alone = dist::make_single_process();
  std::vector<std::string> said;
  auto note = [&](const std::string& s) { said.push_back(s); };
  const ModelConfig config = recipe.model_config(100);
  EXPECT_EQ(run_batch_size(recipe, config, Device::cpu, DType::f32, *alone, false, note).accumulate,
            5);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("accumulate 5 (auto)"), std::string::npos) << said[0];
  write_state(dir / "run", "step-000000002", {{"max_tokens", 400}, {"accumulate", 3}});
  said.clear();
  EXPECT_EQ(run_batch_size(recipe, config, Device::cpu, DType::f32, *alone, true, note).accumulate,
            3);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("; resuming: max_tokens 400 x accumulate 3 as step-000000002 was trained"),
            std::string::npos)
      << said[0];
}

TEST(TrainRunBatchSize, OnlyWhatTheRecipeLeavesToAutoIsTakenFromTheCheckpoint) {
  TrainRecipe recipe;
  recipe.max_tokens = kAutoBatch;
  recipe.accumulate = 2;
  BatchSize chosen;
  chosen.max_tokens = 1000;
  chosen.accumulate = 2;
  chosen.memory_tokens = 1000;
  EXPECT_EQ(
      keep_recorded_batch_size(recipe, {{"max_tokens", 1200}, {"accumulate", 9}}, "step-7", chosen),
      "; resuming: max_tokens 1200 x accumulate 2 as step-7 was trained (more than the 1000 "
      "tokens the memory holds by the estimate)");
  EXPECT_EQ(chosen.max_tokens, 1200);
  EXPECT_EQ(chosen.accumulate, 2);
  // The same numbers, none recorded, or a damaged state: nothing to say, nothing changed.
  EXPECT_EQ(
      keep_recorded_batch_size(recipe, {{"max_tokens", 1200}, {"accumulate", 2}}, "s", chosen), "");
  EXPECT_EQ(keep_recorded_batch_size(recipe, {{"max_tokens", 64}}, "s", chosen), "");
  EXPECT_EQ(keep_recorded_batch_size(recipe, nlohmann::json(), "s", chosen), "");
  EXPECT_EQ(chosen.max_tokens, 1200);
}

TEST(TrainRunData, AValidationPairBeyondThePositionsIsAnErrorNamingItsLine) {
  TrainRecipe recipe;
  recipe.valid_source = "valid.en";
  recipe.valid_target = "valid.de";
  const data::Corpus valid =
      data::Corpus::from_pairs({{{5, 6}, {7}}, {{5, 6, 7}, {8}}, {{5}, {6, 7, 8, 9}}});
  check_validation_lengths(valid, recipe, 5);
  expect_error([&] { check_validation_lengths(valid, recipe, 4); },
               {"valid.de:3: the validation pair needs 5 positions, more than the model's 4 "
                "(model.max_positions): raise it, or remove the pair"});
  expect_error([&] { check_validation_lengths(valid, recipe, 2); },
               {"valid.en:2: the validation pair needs 3 positions"});
}

TEST(TrainRunData, ValidationBatchesHoldEveryPairOnce) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  for (int32_t i = 0; i < 30; ++i)
    pairs.push_back({std::vector<int32_t>(static_cast<size_t>(1 + i % 7), 5),
                     std::vector<int32_t>(static_cast<size_t>(1 + i % 5), 6)});
  const data::Corpus valid = data::Corpus::from_pairs(pairs);
  const std::vector<nn::Batch> batches = validation_batches(valid, 40);
  EXPECT_GT(batches.size(), 1u);
  int64_t rows = 0;
  for (const nn::Batch& batch : batches) rows += batch.size();
  EXPECT_EQ(rows, 30);
  // The same batches every time (no shuffling).
  const std::vector<nn::Batch> again = validation_batches(valid, 40);
  ASSERT_EQ(again.size(), batches.size());
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_EQ(again[i].src_lengths, batches[i].src_lengths);
}

}  // namespace
}  // namespace tfm::internal
