// End to end through the tfm binary: train a tiny model from raw text with a recipe, resume it,
// average its checkpoints, and translate with the result.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data_test_util.h"
#include "tfm/model/config.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/run_cadence.h"
#include "train_test_util.h"

namespace tfm::internal {
namespace {

using testing::run_tfm_command;
using testing::TempDir;

using testing::quoted;
using testing::write_recipe;

TEST(CliTrainTranslate, TrainResumeAverageTranslate) {
  TempDir dir;
  write_recipe(dir);
  auto first =
      run_tfm_command(fmt::format("train -c {} --max-steps 4", quoted(dir / "recipe.yaml")), dir);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("step 4 |"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("valid | step 4"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("BLEU"), std::string::npos) << first.err;
  auto checkpoints = list_checkpoints(dir / "run" / "checkpoints");
  ASSERT_EQ(checkpoints.size(), 2u);  // steps 2 and 4
  EXPECT_EQ(checkpoints.back().filename(), "step-000000004");
  std::string metrics = testing::read_text(dir / "run" / "metrics.jsonl");
  EXPECT_NE(metrics.find("\"type\":\"train\""), std::string::npos);
  EXPECT_NE(metrics.find("\"type\":\"valid\""), std::string::npos);

  // Without --resume a run directory with checkpoints is refused.
  auto again =
      run_tfm_command(fmt::format("train -c {} --max-steps 6", quoted(dir / "recipe.yaml")), dir);
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;

  auto resumed = run_tfm_command(
      fmt::format("train -c {} --max-steps 8 --resume", quoted(dir / "recipe.yaml")), dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("step 6 |"), std::string::npos) << resumed.err;
  EXPECT_EQ(list_checkpoints(dir / "run" / "checkpoints").back().filename(), "step-000000008");
  EXPECT_EQ(list_checkpoints(dir / "run" / "checkpoints").size(), 3u);  // keep: 3

  auto averaged =
      run_tfm_command(fmt::format("average -c {} -n 2 -o {}", quoted(dir / "run" / "checkpoints"),
                                  quoted(dir / "avg")),
                      dir);
  ASSERT_EQ(averaged.status, 0) << averaged.err;
  ASSERT_TRUE(std::filesystem::exists(dir / "avg" / kVocabFileName));

  // Empty lines stay empty, order is kept, one output line per input line.
  testing::write_text(dir / "input.txt", "the dog runs\n\na man is walking\n");
  auto translated = run_tfm_command(
      fmt::format("translate -m {} -i {} -b 2", quoted(dir / "avg"), quoted(dir / "input.txt")),
      dir);
  ASSERT_EQ(translated.status, 0) << translated.err;
  std::vector<std::string> lines;
  std::stringstream out(translated.out);
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << translated.out;
  EXPECT_EQ(lines[1], "");

  // bf16 products: the same shape of output; an unknown precision is a one-line error.
  auto bf16 = run_tfm_command(fmt::format("translate -m {} -i {} -b 2 --precision bf16",
                                          quoted(dir / "avg"), quoted(dir / "input.txt")),
                              dir);
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  EXPECT_EQ(std::count(bf16.out.begin(), bf16.out.end(), '\n'), 3) << bf16.out;
  // int8 products (on every CPU: 7-bit activations where it has no AVX512-VNNI).
  auto int8 = run_tfm_command(fmt::format("translate -m {} -i {} -b 2 --precision int8",
                                          quoted(dir / "avg"), quoted(dir / "input.txt")),
                              dir);
  ASSERT_EQ(int8.status, 0) << int8.err;
  EXPECT_EQ(std::count(int8.out.begin(), int8.out.end(), '\n'), 3) << int8.out;
  auto fp16 = run_tfm_command(fmt::format("translate -m {} -i {} --precision fp16",
                                          quoted(dir / "avg"), quoted(dir / "input.txt")),
                              dir);
  EXPECT_NE(fp16.status, 0);
  EXPECT_NE(fp16.err.find("'fp16' is not a precision"), std::string::npos) << fp16.err;

  auto no_vocab =
      run_tfm_command(fmt::format("translate -m {}", quoted(dir / "run" / "nothing")), dir);
  EXPECT_NE(no_vocab.status, 0);
  EXPECT_EQ(std::count(no_vocab.err.begin(), no_vocab.err.end(), '\n'), 1) << no_vocab.err;
}

}  // namespace
}  // namespace tfm::internal

namespace tfm::internal {
namespace {

// On a GPU: train there (validation BLEU included), resume the run on the CPU from the GPU's
// checkpoint, and translate the result on both devices with the same output. Without a usable GPU,
// `--device cuda` is a one-line error saying why, before anything is written.
TEST(CliTrainTranslate, TrainOnTheGpuResumeOnTheCpuTranslateOnBoth) {
  TempDir dir;
  write_recipe(dir);
  const std::string recipe = quoted(dir / "recipe.yaml");
  const std::string why = ops::device_unavailable_reason(Device::cuda);
  auto gpu = run_tfm_command(fmt::format("train -c {} --max-steps 4 --device cuda", recipe), dir);
  if (!why.empty()) {
    EXPECT_NE(gpu.status, 0);
    EXPECT_NE(gpu.err.find(why), std::string::npos) << gpu.err;
    EXPECT_EQ(std::count(gpu.err.begin(), gpu.err.end(), '\n'), 1) << gpu.err;
    EXPECT_TRUE(list_checkpoints(dir / "run" / "checkpoints").empty());
    return;
  }
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_NE(gpu.err.find("on NVIDIA"), std::string::npos) << gpu.err;  // the model: line
  EXPECT_NE(gpu.err.find("valid | step 4"), std::string::npos) << gpu.err;
  auto cpu =
      run_tfm_command(fmt::format("train -c {} --max-steps 6 --resume --device cpu", recipe), dir);
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_NE(cpu.err.find("resuming from"), std::string::npos) << cpu.err;
  const std::filesystem::path last = list_checkpoints(dir / "run" / "checkpoints").back();
  EXPECT_EQ(last.filename(), "step-000000006");
  testing::write_text(dir / "input.txt", "the dog runs\na man is walking\n");
  std::string outputs[2];
  for (int i = 0; i < 2; ++i) {
    auto run = run_tfm_command(fmt::format("translate -m {} -i {} --device {}", quoted(last),
                                           quoted(dir / "input.txt"), i == 0 ? "cpu" : "cuda"),
                               dir);
    ASSERT_EQ(run.status, 0) << run.err;
    outputs[i] = run.out;
  }
  EXPECT_EQ(outputs[1], outputs[0]);
}

TEST(CliTrainTranslate, OneEpochValidatesOnceAtItsEnd) {
  TempDir dir;
  write_recipe(dir);
  auto run = run_tfm_command(
      fmt::format("train -c {} --set training.max_epochs=1 --set validation.every_steps=0 "
                  "--set validation.bleu=false --set checkpoints.every_steps=0",
                  quoted(dir / "recipe.yaml")),
      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  std::string metrics = testing::read_text(dir / "run" / "metrics.jsonl");
  size_t valid_records = 0;
  for (size_t at = metrics.find("\"type\":\"valid\""); at != std::string::npos;
       at = metrics.find("\"type\":\"valid\"", at + 1))
    ++valid_records;
  EXPECT_EQ(valid_records, 1u) << metrics;
  EXPECT_NE(metrics.find("\"epoch\":1,\"loss\""), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("\"epoch\":2"), std::string::npos) << "trained into a second epoch";
  // The final checkpoint is at the epoch's last step.
  auto checkpoints = list_checkpoints(dir / "run" / "checkpoints");
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_NE(
      run.err.find(fmt::format("valid | step {} ", load_checkpoint(checkpoints[0]).state.step)),
      std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace tfm::internal

namespace tfm::internal {
namespace {

// A 6-second run of the test recipe in `dir` with `sets` added, checkpoints by time only and
// validation only at its end (so that the first updates time the run's speed).
auto train_for_six_seconds(const TempDir& dir, const std::string& sets) {
  return run_tfm_command(
      fmt::format("train -c {} --max-minutes 0.1 --set checkpoints.every_steps=0 "
                  "--set validation.bleu=false --set validation.every_steps=1000000000 {}",
                  quoted(dir / "recipe.yaml"), sets),
      dir);
}

// The value of `field` ("lr", "loss") of each logged update in metrics.jsonl, by step.
std::map<int64_t, double> logged_train_values(const std::filesystem::path& metrics_path,
                                              const std::string& field) {
  std::map<int64_t, double> values;
  std::stringstream lines(testing::read_text(metrics_path));
  for (std::string line; std::getline(lines, line);) {
    auto record = nlohmann::json::parse(line);
    if (record["type"] == "train") values[record["step"].get<int64_t>()] = record[field];
  }
  return values;
}

std::map<int64_t, double> logged_learning_rates(const std::filesystem::path& metrics_path) {
  return logged_train_values(metrics_path, "lr");
}

std::map<int64_t, double> logged_losses(const std::filesystem::path& metrics_path) {
  return logged_train_values(metrics_path, "loss");
}

TEST(CliTrainTranslate, WarmupAndCheckpointsFitAStepBudgetAndSurviveAResume) {
  TempDir dir;
  write_recipe(dir);
  const std::string budget_fitted =
      "--set optimizer.warmup=1000 --set optimizer.warmup_fraction=0.25 "
      "--set checkpoints.every_fraction=0.25 --set checkpoints.every_steps=0 "
      "--set checkpoints.keep=10 --set validation.bleu=false";
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-steps 20 {}", quoted(dir / "recipe.yaml"), budget_fitted),
      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("warmup: 5 updates (0.25 of the about 20 updates of the budget, at most "
                         "1000) to the peak learning rate 0.00791"),
            std::string::npos)
      << run.err;
  // Equation 3 (d_model 16) rises to the peak of warmup 1000, 16^-0.5 * 1000^-0.5, in 5 updates,
  // then decays as peak * sqrt(5 / step).
  const double peak = 0.25 / std::sqrt(1000.0);
  auto rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  ASSERT_TRUE(rates.count(4) && rates.count(6) && rates.count(20));
  EXPECT_NEAR(rates[4], peak * 4 / 5, 1e-12);
  EXPECT_NEAR(rates[6], peak * std::sqrt(5.0 / 6), 1e-12);
  EXPECT_NEAR(rates[20], peak * std::sqrt(5.0 / 20), 1e-12);
  // A checkpoint every quarter of the budget.
  std::vector<std::string> names;
  for (const auto& c : list_checkpoints(dir / "run" / "checkpoints"))
    names.push_back(c.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"step-000000005", "step-000000010", "step-000000015",
                                             "step-000000020"}));

  // A longer budget on resume keeps the warmup the run started with (the schedule is the run's).
  auto resumed = run_tfm_command(fmt::format("train -c {} --max-steps 40 --resume {}",
                                             quoted(dir / "recipe.yaml"), budget_fitted),
                                 dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("warmup:"), std::string::npos) << resumed.err;
  rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  ASSERT_TRUE(rates.count(22));
  EXPECT_NEAR(rates[22], peak * std::sqrt(5.0 / 22), 1e-12);
}

// model.dropout auto: chosen from the epochs of the step budget, said in the log, written into
// every checkpoint's configuration, and kept by a resumed run (whose checkpoint must match it).
TEST(CliTrainTranslate, DropoutAutoIsChosenFromTheBudgetsEpochsAndSurvivesAResume) {
  TempDir dir;
  write_recipe(dir);
  const std::string options =
      "--set model.dropout=auto --set validation.bleu=false --set checkpoints.every_steps=10 "
      "--set data.max_tokens=2000";
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-steps 100 {}", quoted(dir / "recipe.yaml"), options), dir);
  ASSERT_EQ(run.status, 0) << run.err;
  // "dropout: P for the about E epochs of the budget (model.dropout auto)"
  const size_t at = run.err.find("dropout: ");
  ASSERT_NE(at, std::string::npos) << run.err;
  double chosen = -1, epochs = -1;
  ASSERT_EQ(
      std::sscanf(run.err.c_str() + at, "dropout: %lf for the about %lf epochs", &chosen, &epochs),
      2)
      << run.err;
  EXPECT_EQ(chosen, dropout_for_epochs(epochs));
  EXPECT_GT(chosen, 0.0) << "100 updates are several epochs of the test corpus: " << run.err;
  const auto checkpoints = list_checkpoints(dir / "run" / "checkpoints");
  ASSERT_FALSE(checkpoints.empty());
  EXPECT_EQ(load_config(checkpoints.back() / "config.json").dropout, chosen);
  // A step budget chooses before the first update: the run is the one with that dropout given.
  TempDir given;
  write_recipe(given);
  auto same = run_tfm_command(fmt::format("train -c {} --max-steps 100 {} --set model.dropout={}",
                                          quoted(given / "recipe.yaml"), options, chosen),
                              given);
  ASSERT_EQ(same.status, 0) << same.err;
  const auto losses = logged_losses(dir / "run" / "metrics.jsonl");
  ASSERT_FALSE(losses.empty());
  EXPECT_EQ(losses, logged_losses(given / "run" / "metrics.jsonl"));

  auto resumed = run_tfm_command(
      fmt::format("train -c {} --max-steps 120 --resume {}", quoted(dir / "recipe.yaml"), options),
      dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("dropout: "), std::string::npos) << resumed.err;  // kept, not chosen
  EXPECT_EQ(
      load_config(list_checkpoints(dir / "run" / "checkpoints").back() / "config.json").dropout,
      chosen);
}

// A time budget: the warmup is a tenth of the updates that the time left allows at the speed of
// the first updates. How many updates the run then makes depends on how the machine's speed moves
// during it (the tiny model's first epoch, which creates oneDNN primitives for each new batch
// shape, runs at half its later speed), so the test checks the estimate against the speed that the
// log shows for the timed updates, and the learning rates against the fitted warmup.
TEST(CliTrainTranslate, WarmupFitsATimeBudgetFromTheSpeedOfTheFirstUpdates) {
  TempDir dir;
  write_recipe(dir);
  // Every update logged, with validation only at the end (every_steps beyond the run): the log's
  // clock at updates 1 and 21 is then the clock the estimate read. Batches of 2000 tokens make the
  // 20 timed updates take a tenth of a second.
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-minutes 0.1 --set optimizer.warmup=100000 "
                  "--set optimizer.warmup_fraction=0.1 --set checkpoints.every_fraction=0.5 "
                  "--set checkpoints.every_steps=0 --set validation.bleu=false "
                  "--set validation.every_steps=1000000000 --set training.precision=auto "
                  "--set training.log_every=1 --set data.max_tokens=2000",
                  quoted(dir / "recipe.yaml")),
      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  const size_t at = run.err.find("warmup: ");
  ASSERT_NE(at, std::string::npos) << run.err;
  long long warmup = 0;
  double estimate = 0, ms = 0;
  int first = 0, last = 0;
  ASSERT_EQ(std::sscanf(run.err.c_str() + at,
                        "warmup: %lld updates (0.1 of the about %lf updates of the budget at %lf "
                        "ms an update (updates %d-%d), at most 100000)",
                        &warmup, &estimate, &ms, &first, &last),
            5)
      << run.err;
  // The updates after the first (which also pays for start-up), kWarmupProbeUpdates of them.
  EXPECT_EQ(first, 2);
  EXPECT_EQ(last, 1 + kWarmupProbeUpdates);
  const std::map<int64_t, double> clock =
      logged_train_values(dir / "run" / "metrics.jsonl", "elapsed_s");
  ASSERT_TRUE(clock.count(first - 1) && clock.count(last)) << run.err;
  const double seconds_per_update = (clock.at(last) - clock.at(first - 1)) / (last - first + 1);
  EXPECT_GT(seconds_per_update, 0.0);
  // (The log reads the clock microseconds after the estimate did; the line rounds to 4 digits.)
  EXPECT_NEAR(ms / 1e3, seconds_per_update, 0.02 * seconds_per_update) << run.err;
  // The estimate: the updates done, plus those that the rest of the 6 seconds allows at that speed.
  const double expected = last + (6.0 - clock.at(last)) / (ms / 1e3);
  EXPECT_NEAR(estimate, expected, 0.01 * expected) << run.err;
  // (E is printed rounded to a whole update, so a tenth of it is the warmup to within 0.05 + 0.5;
  // on a machine slow enough that a tenth has passed within the timed updates, as under a
  // sanitizer, the warmup ends at the update it was fitted at.)
  EXPECT_NEAR(static_cast<double>(warmup), std::max(0.1 * estimate, static_cast<double>(last)),
              0.55)
      << run.err;
  EXPECT_GT(warmup, 1) << run.err;
  // From update 22 on the learning rate follows equation 3 with the fitted warmup W at the recipe's
  // peak: d_model 16 and warmup 100000 give 16^-0.5 * 100000^-0.5, reached now at update W.
  const double peak = 0.25 / std::sqrt(100000.0);
  const auto rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  const double w = static_cast<double>(warmup);
  for (const int64_t step : {int64_t{last} + 1, int64_t{warmup}, rates.rbegin()->first}) {
    if (step <= last) continue;  // a machine slow enough for a warmup within the timed updates
    ASSERT_TRUE(rates.count(step)) << step;
    const auto s = static_cast<double>(step);
    EXPECT_NEAR(rates.at(step), peak * std::min(s / w, std::sqrt(w / s)), 1e-12) << step;
  }
  EXPECT_NE(run.err.find("checkpoints every 0.05 minutes, keeping the last 3"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find(ops::native_bf16_products() ? "bf16 products" : "f32 products"),
            std::string::npos)
      << run.err;
}

// A warmup the fraction would end before the update it is fitted at (a machine so slow, or a
// fraction so small, that the timed updates outlast it) ends at that update instead: the rate never
// climbs past the warmup's end, and the line says so.
TEST(CliTrainTranslate, AFittedWarmupThatHasPassedEndsAtTheUpdateItIsFittedAt) {
  TempDir dir;
  write_recipe(dir);
  auto run =
      train_for_six_seconds(dir,
                            "--set optimizer.warmup=100000 --set optimizer.warmup_fraction=0.0001 "
                            "--set training.log_every=1");
  ASSERT_EQ(run.status, 0) << run.err;
  const size_t at = run.err.find("warmup: ");
  ASSERT_NE(at, std::string::npos) << run.err;
  long long warmup = 0;
  int first = 0, last = 0;
  ASSERT_EQ(std::sscanf(run.err.c_str() + at,
                        "warmup: %lld updates (0.0001 of the about %*f updates of the budget at "
                        "%*f ms an update (updates %d-%d), at most 100000;",
                        &warmup, &first, &last),
            3)
      << run.err;
  EXPECT_EQ(warmup, last) << run.err;
  EXPECT_NE(run.err.find("by the fraction, passed already) to the peak learning rate", at),
            std::string::npos)
      << run.err;
  const double peak = 0.25 / std::sqrt(100000.0);
  const auto rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  ASSERT_TRUE(rates.count(warmup + 1)) << run.err;
  double before = peak;
  for (const auto& [step, rate] : rates) {
    if (step <= warmup) {
      EXPECT_LT(rate, peak) << step;  // climbing on the recipe's warmup of 100000
      continue;
    }
    const auto s = static_cast<double>(step), w = static_cast<double>(warmup);
    EXPECT_NEAR(rate, peak * std::sqrt(w / s), 1e-12) << step;
    EXPECT_LE(rate, before) << step;
    before = rate;
  }
}

// optimizer.schedule linear: equation 3's warmup to its peak, then a straight line to zero at
// training.max_steps; a resumed run gives each update the rate the run would have given it, even
// with a longer budget (the decay's end is the run's, kept in its checkpoints).
TEST(CliTrainTranslate, ALinearScheduleDecaysToZeroAtTheStepBudgetAndAResumeKeepsItsRates) {
  TempDir dir;
  write_recipe(dir);
  const std::string linear =
      "--set optimizer.warmup=4 --set optimizer.schedule=linear --set checkpoints.keep=20 "
      "--set validation.bleu=false";
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-steps 20 {}", quoted(dir / "recipe.yaml"), linear), dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("schedule: linear decay from the peak learning rate 0.125 at update 4 to "
                         "0 at update 20 (training.max_steps)"),
            std::string::npos)
      << run.err;
  // d_model 16, warmup 4: the peak 16^-0.5 * 4^-0.5 = 0.125 at update 4, then 0.125 * (20 - s)
  // / 16.
  const auto rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(rates.size(), 10u);
  EXPECT_DOUBLE_EQ(rates.at(2), 0.0625);
  EXPECT_DOUBLE_EQ(rates.at(4), 0.125);
  EXPECT_DOUBLE_EQ(rates.at(12), 0.0625);  // half way
  EXPECT_DOUBLE_EQ(rates.at(18), 0.125 * 2 / 16);
  EXPECT_EQ(rates.at(20), 0.0);
  EXPECT_EQ(load_training_state(list_checkpoints(dir / "run" / "checkpoints").back())
                .extra.value("decay_end", int64_t{0}),
            20);

  // As if stopped at update 10: the later checkpoints go, and the run resumes with a longer
  // budget. Updates 11-20 get the same rates, and the rate stays 0 after the run's end.
  for (const auto& checkpoint : list_checkpoints(dir / "run" / "checkpoints"))
    if (load_training_state(checkpoint).step > 10) std::filesystem::remove_all(checkpoint);
  auto resumed = run_tfm_command(
      fmt::format("train -c {} --max-steps 24 --resume {}", quoted(dir / "recipe.yaml"), linear),
      dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from"), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("schedule:"), std::string::npos) << resumed.err;
  const auto resumed_rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  for (int64_t step = 2; step <= 20; step += 2)
    EXPECT_EQ(resumed_rates.at(step), rates.at(step)) << step;
  EXPECT_EQ(resumed_rates.at(22), 0.0);
  EXPECT_EQ(resumed_rates.at(24), 0.0);
}

// With a time budget the decay's end is the estimate that fits the warmup, said in the log and
// recorded in the checkpoints.
TEST(CliTrainTranslate, ACosineScheduleDecaysToTheUpdatesATimeBudgetAllows) {
  TempDir dir;
  write_recipe(dir);
  auto run = train_for_six_seconds(dir, "--set optimizer.warmup=2 --set optimizer.schedule=cosine");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string said = "schedule: cosine decay from the peak learning rate ";
  const size_t at = run.err.find(said);
  ASSERT_NE(at, std::string::npos) << run.err;
  const size_t end_at = run.err.find(" to 0 at update ", at);
  ASSERT_NE(end_at, std::string::npos) << run.err;
  const int64_t end = std::stoll(run.err.substr(end_at + 16));
  EXPECT_NE(run.err.find("(the updates training.max_minutes 0.1 allows, estimated after update 21)",
                         end_at),
            std::string::npos)
      << run.err;
  EXPECT_GT(end, 21) << run.err;
  EXPECT_EQ(load_training_state(list_checkpoints(dir / "run" / "checkpoints").back())
                .extra.value("decay_end", int64_t{0}),
            end);
  for (const auto& [step, rate] : logged_learning_rates(dir / "run" / "metrics.jsonl")) {
    EXPECT_GE(rate, 0.0) << step;
    EXPECT_LE(rate, 0.25 / std::sqrt(2.0) + 1e-15) << step;
  }
}

// Under a time budget a decay's end is estimated twice: after the probe (which also fits the
// warmup) and at the warmup's end; the second is recorded and the rates after it follow it.
TEST(CliTrainTranslate, ADecaysEndIsEstimatedAgainAtTheWarmupsEnd) {
  TempDir dir;
  write_recipe(dir);
  auto run =
      train_for_six_seconds(dir,
                            "--set optimizer.warmup=100000 --set optimizer.warmup_fraction=0.5 "
                            "--set optimizer.schedule=linear");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string said =
      "schedule: the decay's end estimated again at the warmup's end, from the "
      "speed of the updates so far: 0 at update ";
  const size_t at = run.err.find(said);
  ASSERT_NE(at, std::string::npos) << run.err;
  const int64_t end = std::stoll(run.err.substr(at + said.size()));
  const size_t was_at = run.err.find(" (was ", at);
  ASSERT_NE(was_at, std::string::npos) << run.err;
  const int64_t first_end = std::stoll(run.err.substr(was_at + 6));
  // The warmup is half of the first estimate.
  const std::string warmup_said = "warmup: ";
  const size_t warmup_at = run.err.find(warmup_said);
  ASSERT_NE(warmup_at, std::string::npos) << run.err;
  const int64_t warmup = std::stoll(run.err.substr(warmup_at + warmup_said.size()));
  EXPECT_NEAR(static_cast<double>(warmup), first_end / 2.0, 1.0) << run.err;
  EXPECT_GT(end, warmup) << run.err;
  EXPECT_EQ(load_training_state(list_checkpoints(dir / "run" / "checkpoints").back())
                .extra.value("decay_end", int64_t{0}),
            end);
  // d_model 16, recipe warmup 100000: the peak 16^-0.5 * 100000^-0.5, then linear to `end`.
  const double peak = 0.25 / std::sqrt(100000.0);
  int64_t checked = 0;
  for (const auto& [step, rate] : logged_learning_rates(dir / "run" / "metrics.jsonl")) {
    if (step <= warmup) continue;
    const double want =
        step >= end ? 0.0 : peak * (1.0 - static_cast<double>(step - warmup) / (end - warmup));
    EXPECT_NEAR(rate, want, 1e-12) << step;
    ++checked;
  }
  EXPECT_GT(checked, 0) << run.err;
}

// During the decay a time budget's end is estimated again at each checkpoint and the decay moves to
// it from there without a jump: the rate falls all the way, each stretch on the line from the rate
// where the end moved to zero at the new end, and the checkpoints record the last move.
TEST(CliTrainTranslate, ADecaysEndFollowsTheTimeBudgetDuringTheDecay) {
  TempDir dir;
  write_recipe(dir);
  auto run =
      train_for_six_seconds(dir,
                            "--set optimizer.warmup=100000 --set optimizer.warmup_fraction=0.25 "
                            "--set optimizer.schedule=linear --set checkpoints.every_fraction=0.1 "
                            "--set checkpoints.keep=2 --set training.log_every=1");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string said = "schedule: the decay's end estimated again at update ";
  std::vector<std::pair<int64_t, int64_t>> moves;  // (update, new end)
  for (size_t at = run.err.find(said); at != std::string::npos; at = run.err.find(said, at + 1)) {
    const size_t end_at = run.err.find(": 0 at update ", at);
    ASSERT_NE(end_at, std::string::npos) << run.err;
    moves.emplace_back(std::stoll(run.err.substr(at + said.size())),
                       std::stoll(run.err.substr(end_at + 14)));
  }
  ASSERT_FALSE(moves.empty()) << run.err;
  const auto rates = logged_learning_rates(dir / "run" / "metrics.jsonl");
  const std::string warmup_said = "warmup: ";
  const size_t warmup_at = run.err.find(warmup_said);
  ASSERT_NE(warmup_at, std::string::npos) << run.err;
  const int64_t warmup = std::stoll(run.err.substr(warmup_at + warmup_said.size()));
  for (const auto& [step, rate] : rates) {
    if (step > warmup && rates.count(step - 1)) {
      EXPECT_LE(rate, rates.at(step - 1)) << step;
    }
  }
  for (size_t i = 0; i < moves.size(); ++i) {
    const auto [from, end] = moves[i];
    ASSERT_GT(from, warmup) << run.err;
    ASSERT_TRUE(rates.count(from)) << from;
    const int64_t until = i + 1 < moves.size() ? moves[i + 1].first : rates.rbegin()->first;
    for (int64_t step = from + 1; step <= until; ++step) {
      const double want = step >= end ? 0.0
                                      : rates.at(from) * static_cast<double>(end - step) /
                                            static_cast<double>(end - from);
      EXPECT_NEAR(rates.at(step), want, 1e-12) << step << " after the move at " << from;
    }
  }
  const TrainingState last =
      load_training_state(list_checkpoints(dir / "run" / "checkpoints").back());
  EXPECT_EQ(last.extra.value("decay_end", int64_t{0}), moves.back().second);
  EXPECT_EQ(last.extra.value("decay_from", int64_t{0}), moves.back().first);
}

// A time budget that ends within the recipe's warmup leaves nothing to decay over: the log says so.
TEST(CliTrainTranslate, ADecayThatATimeBudgetEndsWithinTheWarmupIsSaid) {
  TempDir dir;
  write_recipe(dir);
  auto run =
      train_for_six_seconds(dir, "--set optimizer.warmup=1000000 --set optimizer.schedule=linear");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("end within the warmup of 1000000: the rate is 0 from update 1000001 on "
                         "(optimizer.warmup_fraction fits the warmup to the budget)"),
            std::string::npos)
      << run.err;
}

// Every checkpoint counts its run's updates by the products they ran in, across resumes: a run
// continued on another machine, where `auto` may choose otherwise, says so (tfm sweep's table).
TEST(CliTrainTranslate, CheckpointsCountTheUpdatesByTheirProducts) {
  TempDir dir;
  write_recipe(dir);
  auto first = run_tfm_command(fmt::format("train -c {} --max-steps 2 --set training.precision=f32",
                                           quoted(dir / "recipe.yaml")),
                               dir);
  ASSERT_EQ(first.status, 0) << first.err;
  auto steps_by_products = [&] {
    return load_training_state(list_checkpoints(dir / "run" / "checkpoints").back())
        .extra.value("steps_by_products", nlohmann::json());
  };
  EXPECT_EQ(steps_by_products(), nlohmann::json({{"f32", 2}}));
  auto resumed = run_tfm_command(
      fmt::format("train -c {} --max-steps 6 --resume --set training.precision=bf16",
                  quoted(dir / "recipe.yaml")),
      dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(steps_by_products(), nlohmann::json({{"f32", 2}, {"bf16", 4}}));
  auto again =
      run_tfm_command(fmt::format("train -c {} --max-steps 8 --resume --set training.precision=f32",
                                  quoted(dir / "recipe.yaml")),
                      dir);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(steps_by_products(), nlohmann::json({{"f32", 4}, {"bf16", 4}}));
}

TEST(CliTrainTranslate, WithoutAWarmupFractionATimeBudgetKeepsTheRecipesWarmup) {
  TempDir dir;
  write_recipe(dir);
  auto run =
      run_tfm_command(fmt::format("train -c {} --max-minutes 0.02 --set optimizer.warmup=1000 "
                                  "--set validation.bleu=false",
                                  quoted(dir / "recipe.yaml")),
                      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(run.err.find("warmup:"), std::string::npos) << run.err;
  // Still on equation 3's linear rise of warmup 1000 (d_model 16).
  for (const auto& [step, rate] : logged_learning_rates(dir / "run" / "metrics.jsonl"))
    EXPECT_NEAR(rate, 0.25 * static_cast<double>(step) * std::pow(1000.0, -1.5), 1e-12) << step;
}

}  // namespace
}  // namespace tfm::internal

namespace tfm::internal {
namespace {

// data.max_tokens and data.accumulate `auto` with data.update_tokens (train/batch_size.h): the log
// says what memory was seen and what was chosen, the run trains, its checkpoints record the batch
// size, and a resume keeps it whatever the memory and the recipe's update_tokens now say.
TEST(CliTrainTranslate, BatchSizeFromTheMemoryOfTheDevice) {
  TempDir dir;
  write_recipe(dir);
  const std::string recipe = quoted(dir / "recipe.yaml");
  const std::string automatic =
      "--set data.max_tokens=auto --set data.accumulate=auto --set validation.bleu=false";
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-steps 2 {} --set data.update_tokens=1000", recipe, automatic),
      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("batch size: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" free (cpu: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find(" a padded token (1 layers, d_model 16, max_length 128, "),
            std::string::npos)
      << run.err;
  // The tiny model's memory holds far more than an update: one batch of update_tokens.
  EXPECT_NE(run.err.find("max_tokens 1000 (auto) x accumulate 1 (auto) x 1 rank = 1000 tokens an "
                         "update (data.update_tokens 1000)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("batches of 1000 tokens x 1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("done at step 2"), std::string::npos) << run.err;
  const auto checkpoints = list_checkpoints(dir / "run" / "checkpoints");
  ASSERT_FALSE(checkpoints.empty());
  const nlohmann::json extra = load_checkpoint(checkpoints.back()).state.extra;
  EXPECT_EQ(extra.value("max_tokens", int64_t{0}), 1000);
  EXPECT_EQ(extra.value("accumulate", int64_t{0}), 1);

  auto resumed = run_tfm_command(fmt::format("train -c {} --max-steps 4 --resume {} --set "
                                             "data.update_tokens=600",
                                             recipe, automatic),
                                 dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming: max_tokens 1000 x accumulate 1 as step-000000002 was "
                             "trained"),
            std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("done at step 4"), std::string::npos) << resumed.err;

  // A given max_tokens: accumulate makes the update, ceil(1000 / 400) = 3 batches.
  auto given = run_tfm_command(
      fmt::format("train -c {} --max-steps 1 --run-dir {} --set data.max_tokens=400 "
                  "--set data.accumulate=auto --set data.update_tokens=1000",
                  recipe, quoted(dir / "given")),
      dir);
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_NE(given.err.find("batch size: max_tokens 400 x accumulate 3 (auto) x 1 rank = 1200 "
                           "tokens an update (data.update_tokens 1000)"),
            std::string::npos)
      << given.err;
  EXPECT_NE(given.err.find("batches of 400 tokens x 3"), std::string::npos) << given.err;
}

}  // namespace
}  // namespace tfm::internal

namespace tfm::internal {
namespace {

// training.ema_decay: every checkpoint holds ema/, a model directory translate reads; validation
// reports the average's loss and BLEU beside the weights'; a resume continues the average.
TEST(CliTrainTranslate, AMovingAverageOfTheWeightsIsValidatedSavedResumedAndTranslated) {
  TempDir dir;
  testing::write_recipe(dir);
  const std::string ema = "--set training.ema_decay=0.99 --set checkpoints.keep=20";
  auto run = run_tfm_command(
      fmt::format("train -c {} --max-steps 8 {}", quoted(dir / "recipe.yaml"), ema), dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("| EMA loss "), std::string::npos) << run.err;
  const auto checkpoints = list_checkpoints(dir / "run" / "checkpoints");
  ASSERT_EQ(checkpoints.size(), 4u);
  for (const auto& checkpoint : checkpoints)
    EXPECT_TRUE(std::filesystem::exists(checkpoint / "ema"));
  // The validation record of step 8 has the average's measures, and they are not the weights'.
  const std::string metrics = testing::read_text(dir / "run" / "metrics.jsonl");
  nlohmann::json last_valid;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (record["type"] == "valid") last_valid = record;
  }
  ASSERT_TRUE(last_valid.contains("ema_loss")) << metrics;
  ASSERT_TRUE(last_valid.contains("ema_bleu")) << metrics;
  EXPECT_NE(last_valid["ema_loss"].get<double>(), last_valid["loss"].get<double>());
  const Checkpoint newest = load_checkpoint(checkpoints.back());
  ASSERT_FALSE(newest.moving_average.empty());

  // Translating with ema/ as the model.
  testing::write_text(dir / "in.txt", "the cat sees the dog\n");
  auto translated =
      run_tfm_command(fmt::format("translate -m {} -i {} -o {}", quoted(checkpoints.back() / "ema"),
                                  quoted(dir / "in.txt"), quoted(dir / "out.txt")),
                      dir);
  ASSERT_EQ(translated.status, 0) << translated.err;
  EXPECT_FALSE(testing::read_text(dir / "out.txt").empty());

  // Stopped at update 4 and resumed to 8: the same average as the uninterrupted run.
  const std::string uninterrupted =
      testing::read_text(checkpoints.back() / "ema" / "model.safetensors");
  for (const auto& checkpoint : checkpoints)
    if (load_training_state(checkpoint).step > 4) std::filesystem::remove_all(checkpoint);
  auto resumed = run_tfm_command(
      fmt::format("train -c {} --max-steps 8 --resume {}", quoted(dir / "recipe.yaml"), ema), dir);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("has no moving average"), std::string::npos) << resumed.err;
  const auto again = list_checkpoints(dir / "run" / "checkpoints");
  EXPECT_EQ(testing::read_text(again.back() / "ema" / "model.safetensors"), uninterrupted);

  // Without the option no checkpoint has ema/; a bad decay is refused naming the key.
  TempDir plain;
  testing::write_recipe(plain);
  auto off = run_tfm_command(fmt::format("train -c {} --max-steps 2 --set validation.bleu=false",
                                         quoted(plain / "recipe.yaml")),
                             plain);
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_FALSE(
      std::filesystem::exists(list_checkpoints(plain / "run" / "checkpoints").back() / "ema"));
  EXPECT_EQ(off.err.find("EMA"), std::string::npos) << off.err;
  auto bad = run_tfm_command(fmt::format("train -c {} --max-steps 2 --set training.ema_decay=1",
                                         quoted(plain / "recipe.yaml")),
                             plain);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("training.ema_decay must be in [0, 1)"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tfm::internal
