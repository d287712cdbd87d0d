// `tfm train` when things go wrong: damaged checkpoints, an exploding learning rate, a stale
// vocabulary, a validation set beyond the model's positions, a resumed run's metrics, a locked or
// uncreatable run directory, a file size limit. Each case is a reproduction from issue 11.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build_paths.h"
#include "data_test_util.h"
#include "tfm/model/model_dir.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/run_lock.h"
#include "train_test_util.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::quoted;
using testing::run_tfm_command;
using testing::TempDir;
using testing::write_recipe;

testing::CommandResult train(const TempDir& dir, const std::string& options) {
  return run_tfm_command(fmt::format("train -c {} {}", quoted(dir / "recipe.yaml"), options), dir);
}

std::vector<std::string> checkpoint_names(const TempDir& dir) {
  std::vector<std::string> names;
  for (const fs::path& p : list_checkpoints(dir / "run" / "checkpoints"))
    names.push_back(p.filename().string());
  return names;
}

TEST(CliTrainReliability, DamagedNewestCheckpointsAreMovedAsideAndTrainingGoesOn) {
  TempDir dir;
  write_recipe(dir);
  ASSERT_EQ(train(dir, "--max-steps 6").status, 0);
  const fs::path folder = dir / "run" / "checkpoints";
  ASSERT_EQ(checkpoint_names(dir),
            (std::vector<std::string>{"step-000000002", "step-000000004", "step-000000006"}));
  // All but the oldest of the `keep` (3) checkpoints damaged.
  fs::resize_file(folder / "step-000000006" / "model.safetensors", 1000);
  fs::resize_file(folder / "step-000000004" / "optimizer.safetensors", 1000);

  auto resumed = train(dir, "--max-steps 8 --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("moved aside to step-000000006.damaged"), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from " + (folder / "step-000000002").string()),
            std::string::npos)
      << resumed.err;
  // The new checkpoints replace the damaged ones; none of the good ones was pruned for them.
  EXPECT_EQ(checkpoint_names(dir),
            (std::vector<std::string>{"step-000000004", "step-000000006", "step-000000008"}));
  EXPECT_TRUE(fs::is_directory(folder / "step-000000004.damaged"));
  EXPECT_TRUE(fs::is_directory(folder / "step-000000006.damaged"));
  EXPECT_NO_THROW(load_checkpoint(folder / "step-000000008"));
}

TEST(CliTrainReliability, NonFiniteUpdatesAreSkippedThenTheRunStopsKeepingTheLastCheckpoint) {
  TempDir dir;
  write_recipe(dir);
  ASSERT_EQ(train(dir, "--max-steps 4").status, 0);
  // A learning rate far too high: the first update makes the weights huge, the next losses are
  // not finite.
  auto exploded = train(dir, "--max-steps 20 --resume --set optimizer.lr_scale=1e30");
  EXPECT_EQ(exploded.status, 1) << exploded.err;
  EXPECT_NE(exploded.err.find("update skipped (1 in a row)"), std::string::npos) << exploded.err;
  EXPECT_NE(exploded.err.find("not finite in 5 updates in a row"), std::string::npos)
      << exploded.err;
  EXPECT_NE(exploded.err.find("optimizer.lr_scale 1e+30"), std::string::npos) << exploded.err;
  EXPECT_EQ(exploded.err.find("internal error"), std::string::npos) << exploded.err;
  // Nothing non-finite was saved: the newest checkpoint is still step 4, and it loads.
  EXPECT_EQ(checkpoint_names(dir).back(), "step-000000004");
  EXPECT_NO_THROW(load_checkpoint(dir / "run" / "checkpoints" / "step-000000004"));
  EXPECT_NE(testing::read_text(dir / "run" / "metrics.jsonl").find("\"type\":\"skipped\""),
            std::string::npos);
}

TEST(CliTrainReliability, AStaleVocabularyIsLearnedAgainOrRefusedWithCheckpoints) {
  TempDir dir;
  write_recipe(dir);
  ASSERT_EQ(train(dir, "--max-steps 2").status, 0);
  ASSERT_TRUE(fs::exists(dir / "run" / "vocab.recipe.json"));
  // With checkpoints, a changed vocabulary size is refused.
  auto refused = train(dir, "--max-steps 4 --resume --set data.vocab_size=90");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("data.vocab_size 100 -> 90"), std::string::npos) << refused.err;
  // Without checkpoints, it is learned again, saying why.
  fs::remove_all(dir / "run" / "checkpoints");
  auto relearned = train(dir, "--max-steps 2 --set data.vocab_size=90");
  ASSERT_EQ(relearned.status, 0) << relearned.err;
  EXPECT_NE(relearned.err.find("is stale (data.vocab_size 100 -> 90): learning it again"),
            std::string::npos)
      << relearned.err;
  // So is one whose training data changed since.
  fs::remove_all(dir / "run" / "checkpoints");
  testing::write_text(dir / "en.txt",
                      testing::joined_lines(testing::generated_sentences(300, false, 99)));
  auto changed = train(dir, "--max-steps 2 --set data.vocab_size=90");
  ASSERT_EQ(changed.status, 0) << changed.err;
  EXPECT_NE(changed.err.find("is stale (the contents of " + (dir / "en.txt").string()),
            std::string::npos)
      << changed.err;
  // And one that matches is reused without a word.
  fs::remove_all(dir / "run" / "checkpoints");
  auto reused = train(dir, "--max-steps 2 --set data.vocab_size=90");
  ASSERT_EQ(reused.status, 0) << reused.err;
  EXPECT_EQ(reused.err.find("learning"), std::string::npos) << reused.err;
  // data.vocab_sample is part of the record: a sample learns it again, from that many sentences.
  fs::remove_all(dir / "run" / "checkpoints");
  auto sampled = train(dir, "--max-steps 2 --set data.vocab_size=90 --set data.vocab_sample=200");
  ASSERT_EQ(sampled.status, 0) << sampled.err;
  EXPECT_NE(sampled.err.find("is stale (data.vocab_sample 0 -> 200): learning it again"),
            std::string::npos)
      << sampled.err;
  EXPECT_NE(sampled.err.find("from at most 200 sentences sampled from "), std::string::npos)
      << sampled.err;
  auto record = nlohmann::json::parse(testing::read_text(dir / "run" / "vocab.recipe.json"));
  EXPECT_EQ(record["vocab_sample"], 200);
  // A record written before data.vocab_sample existed learned from every sentence: 0.
  fs::remove_all(dir / "run" / "checkpoints");
  ASSERT_EQ(train(dir, "--max-steps 2 --set data.vocab_size=90").status, 0);
  record = nlohmann::json::parse(testing::read_text(dir / "run" / "vocab.recipe.json"));
  record.erase("vocab_sample");
  testing::write_text(dir / "run" / "vocab.recipe.json", record.dump(2));
  fs::remove_all(dir / "run" / "checkpoints");
  auto older = train(dir, "--max-steps 2 --set data.vocab_size=90");
  ASSERT_EQ(older.status, 0) << older.err;
  EXPECT_EQ(older.err.find("learning"), std::string::npos) << older.err;
}

TEST(CliTrainReliability, AValidationPairBeyondTheModelsPositionsIsAnErrorAtStartUp) {
  TempDir dir;
  write_recipe(dir);
  std::string long_line;
  for (int i = 0; i < 40; ++i) long_line += "a man is walking ";
  testing::write_text(dir / "valid.en", "a dog\n" + long_line + "\n");
  testing::write_text(dir / "valid.de", "ein hund\nein mann\n");
  auto result = train(dir, fmt::format("--max-steps 2 --set data.valid_source={} --set "
                                       "data.valid_target={} --set model.positional=learned",
                                       (dir / "valid.en").string(), (dir / "valid.de").string()));
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.err.find((dir / "valid.en").string() + ":2: the validation pair needs"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("model.max_positions"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("step 1 |"), std::string::npos) << "trained before failing";
}

TEST(CliTrainReliability, AResumedRunsMetricsHoldEachStepOnce) {
  TempDir dir;
  write_recipe(dir);
  ASSERT_EQ(train(dir, "--max-steps 6").status, 0);
  // The run is killed after step 6 but its newest checkpoint is lost: steps 5-6 are replayed.
  fs::remove_all(dir / "run" / "checkpoints" / "step-000000006");
  ASSERT_EQ(train(dir, "--max-steps 6 --resume").status, 0);
  std::stringstream lines(testing::read_text(dir / "run" / "metrics.jsonl"));
  int train_step_6 = 0, resumes = 0;
  for (std::string line; std::getline(lines, line);) {
    train_step_6 += line.find("\"type\":\"train\"") != std::string::npos &&
                    line.find("\"step\":6,") != std::string::npos;
    if (line.find("\"type\":\"resume\"") != std::string::npos) {
      ++resumes;
      EXPECT_NE(line.find("\"step\":4"), std::string::npos) << line;
      EXPECT_NE(line.find("\"dropped\":"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(train_step_6, 1);
  EXPECT_EQ(resumes, 1);
}

TEST(CliTrainReliability, ALockedRunDirectoryIsRefusedNamingTheHolder) {
  TempDir dir;
  write_recipe(dir);
  RunDirectoryLock held(dir / "run");
  auto second = train(dir, "--max-steps 2");
  EXPECT_EQ(second.status, 1);
  EXPECT_NE(second.err.find("in use by another training run (pid " + std::to_string(::getpid())),
            std::string::npos)
      << second.err;
}

TEST(CliTrainReliability, FileSystemFailuresNameThePathAndTheReason) {
  TempDir dir;
  write_recipe(dir);
  testing::write_text(dir / "plain-file", "x");
  auto not_a_dir = train(dir, fmt::format("--max-steps 2 --set training.run_dir={}",
                                          (dir / "plain-file" / "run").string()));
  EXPECT_EQ(not_a_dir.status, 1);
  EXPECT_NE(not_a_dir.err.find("plain-file/run: cannot create the run directory: Not a directory"),
            std::string::npos)
      << not_a_dir.err;
  // A file size limit (as a full disk would): the write that fails says why, not "I/O error".
  const std::string command =
      fmt::format("ulimit -f 16; trap '' XFSZ; '{}/tfm' train -c {} --max-steps 2 2> {}",
                  tfm_binary_dir(), quoted(dir / "recipe.yaml"), quoted(dir / "limited.err"));
  const int raw = std::system(fmt::format("bash -c \"{}\"", command).c_str());
  EXPECT_EQ(WEXITSTATUS(raw), 1);
  const std::string err = testing::read_text(dir / "limited.err");
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
  EXPECT_EQ(err.find("internal error"), std::string::npos) << err;
}

// A file named "checkpoints" in the run directory failed the run only at its first checkpoint,
// after the training up to it; it is refused at start-up, before anything is learned.
TEST(CliTrainReliability, AFileWhereTheCheckpointsGoIsRefusedAtStartUp) {
  TempDir dir;
  write_recipe(dir);
  fs::create_directories(dir / "run");
  testing::write_text(dir / "run" / "checkpoints", "x");
  auto run = train(dir, "--max-steps 2");
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "tfm: error: " + (dir / "run" / "checkpoints").string() +
                         ": exists and is not a directory; the run keeps its checkpoints in this "
                         "folder\n");
}

TEST(CliTrainReliability, NegativeCountsAreUsageErrors) {
  TempDir dir;
  for (const char* arguments : {"train --threads -3", "train --max-steps -5",
                                "train --max-minutes -1", "average -n 0 -o x a"}) {
    auto result = run_tfm_command(arguments, dir);
    EXPECT_NE(result.status, 0) << arguments;
    EXPECT_NE(result.err.find("not in range"), std::string::npos)
        << arguments << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

// Starts `tfm train` with 1024 batches an update, sends `signals` (e.g. "INT" or "INT TERM") once
// its training loop runs, and returns its exit status and stderr.
testing::CommandResult train_and_signal(const TempDir& dir, const std::string& signals) {
  const std::string script = fmt::format(
      "'{}/tfm' train -c {} --set data.accumulate=1024 --set model.d_model=64 --set model.d_ff=128 "
      "--set model.d_k=32 --set model.d_v=32 --max-steps 2 2> {} & pid=$!\n"
      "for i in $(seq 1200); do grep -q '^model: ' {} && break; sleep 0.05; done\n"
      "sleep 0.5\n"
      "for s in {}; do kill -$s $pid; done\n"
      "wait $pid; echo $?\n",
      tfm_binary_dir(), quoted(dir / "recipe.yaml"), quoted(dir / "train.err"),
      quoted(dir / "train.err"), signals);
  testing::write_text(dir / "signal.sh", script);
  const int raw = std::system(
      fmt::format("timeout 120 bash {} > {}", quoted(dir / "signal.sh"), quoted(dir / "status"))
          .c_str());
  EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 0) << "the run did not stop";
  return {std::atoi(testing::read_text(dir / "status").c_str()), "",
          testing::read_text(dir / "train.err")};
}

TEST(CliTrainReliability, ASignalStopsBetweenAccumulatedBatchesWithoutAPartialUpdate) {
  // Issue 43 D3: signals were ignored until an update's accumulated batches were all done.
  TempDir dir;
  write_recipe(dir);
  auto result = train_and_signal(dir, "INT");
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_NE(result.err.find("step 1: interrupted after "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("of its 1024 batches: the update is dropped"), std::string::npos)
      << result.err;
  EXPECT_NE(result.err.find("training interrupted; continue it with --resume"), std::string::npos)
      << result.err;
  // The checkpoint is where the run stood before the dropped update: step 0, the first batch.
  ASSERT_EQ(checkpoint_names(dir), (std::vector<std::string>{"step-000000000"}));
  const TrainingState state = load_training_state(dir / "run" / "checkpoints" / "step-000000000");
  EXPECT_EQ(state.step, 0);
  EXPECT_EQ(state.epoch, 0);
  EXPECT_EQ(state.batch_in_epoch, 0);
}

TEST(CliTrainReliability, ASecondSignalEndsTheRunAtOnce) {
  TempDir dir;
  write_recipe(dir);
  // Two different signals: two of one kind sent at once may arrive as one.
  auto result = train_and_signal(dir, "INT TERM");
  EXPECT_TRUE(result.status == 128 + SIGINT || result.status == 128 + SIGTERM)
      << result.status << ": " << result.err;
  EXPECT_NE(result.err.find("tfm: error: training interrupted again: ended at once without "
                            "saving; --resume continues from the last checkpoint"),
            std::string::npos)
      << result.err;
  EXPECT_TRUE(checkpoint_names(dir).empty());
}

TEST(CliTrainReliability, NonFiniteFloatOptionsAreUsageErrorsInEveryCommand) {
  // Issue 43 D13: CLI::Range lets NaN through (every comparison with it is false).
  TempDir dir;
  for (const char* arguments :
       {"train --max-minutes nan", "train --max-minutes inf", "train --max-minutes 1e400",
        "translate --alignment-threshold nan", "translate --alpha nan", "attention --alpha nan",
        "parse --alpha nan", "serve --alpha nan", "serve --request-timeout nan",
        "serve --batch-delay-ms -inf", "sweep --alpha nan", "sweep --budget-minutes nan",
        "bleu --smooth-value nan"}) {
    auto result = run_tfm_command(arguments, dir);
    EXPECT_NE(result.status, 0) << arguments << ": " << result.err;
    // NaN passes CLI::Range and is caught by the finite check; an infinity fails either.
    EXPECT_TRUE(result.err.find("must be a finite number in range") != std::string::npos ||
                result.err.find("not in range") != std::string::npos)
        << arguments << ": " << result.err;
    if (std::string(arguments).ends_with(" nan")) {
      EXPECT_NE(result.err.find("must be a finite number in range, got 'nan'"), std::string::npos)
          << arguments << ": " << result.err;
    }
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

}  // namespace
}  // namespace tfm::internal
