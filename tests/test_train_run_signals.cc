// A training run's signals, the clock and stop its ranks agree on (train/stop_signals.h), and its
// metrics.jsonl (train/run_metrics.h).
#include <gtest/gtest.h>

#include <csignal>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/train/run_metrics.h"
#include "tfm/train/stop_signals.h"

namespace tfm::internal {
namespace {

using testing::TempDir;

std::atomic<int> g_previous_handler_calls{0};
extern "C" void count_signal(int) {
  ++g_previous_handler_calls;
}

TEST(TrainRunSignals, ASignalAsksTheRunToStopAndTheHandlersAreRestoredAfterIt) {
  const auto before = std::signal(SIGTERM, count_signal);
  {
    StopSignals signals;
    EXPECT_FALSE(stop_signal_received());
    std::raise(SIGTERM);
    EXPECT_TRUE(stop_signal_received());
  }
  std::raise(SIGTERM);  // the previous handler again
  EXPECT_EQ(g_previous_handler_calls, 1);
  {
    StopSignals again;  // a new run forgets the last one's signal
    EXPECT_FALSE(stop_signal_received());
  }
  std::signal(SIGTERM, before);
}

TEST(TrainRunSignals, ASecondSignalEndsTheProcessAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        StopSignals signals;
        std::raise(SIGINT);
        std::raise(SIGINT);
      },
      ::testing::ExitedWithCode(128 + SIGINT),
      "training interrupted again: ended at once without saving; --resume continues");
}

TEST(TrainRunSignals, OneRanksClockAndStopAreReadLive) {
  auto alone = dist::make_single_process();
  StopSignals signals;
  RunClock clock(*alone, 100.0);
  EXPECT_GE(clock.elapsed(), 100.0);
  EXPECT_LT(clock.elapsed(), 160.0);
  clock.agree();  // nothing to agree on
  EXPECT_FALSE(clock.stop_requested());
  EXPECT_FALSE(clock.stop_between_batches());
  std::raise(SIGINT);
  EXPECT_TRUE(clock.stop_requested());
  EXPECT_TRUE(clock.stop_between_batches());
}

// Rank 1 of two, whose rank 0 asked to stop at 42 s of the run.
class SecondRank : public dist::Communicator {
 public:
  int rank() const override { return 1; }
  int size() const override { return 2; }
  std::string describe() const override { return "two ranks"; }
  void all_reduce_sum(std::span<float>) override { ADD_FAILURE(); }
  void all_reduce_sum(std::span<double> data) override {
    ++reductions;
    data[0] += 1.0;                        // rank 0's stop
    if (data.size() > 1) data[1] += 42.0;  // rank 0's clock
  }
  std::vector<uint64_t> all_gather(uint64_t value) override { return {value, value}; }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  void start_all_reduce_sum(std::span<float>) override {}
  void progress() override {}
  void wait_all() override {}
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
  int reductions = 0;
};

TEST(TrainRunSignals, SeveralRanksAgreeOnRankZerosClockAndOnAnyRanksStop) {
  SecondRank comm;
  StopSignals signals;
  RunClock clock(comm, 5.0);
  EXPECT_FALSE(clock.stop_requested());  // not agreed yet
  clock.agree();
  EXPECT_EQ(comm.reductions, 1);
  EXPECT_TRUE(clock.stop_requested());
  EXPECT_EQ(clock.elapsed(), 42.0);  // rank 0's; this rank adds 0
  EXPECT_TRUE(clock.stop_between_batches());
  EXPECT_EQ(comm.reductions, 2);
}

TEST(TrainRunSignals, AnAbandonedUpdateStopsTheRun) {
  SecondRank comm;
  RunClock clock(comm, 0.0);
  EXPECT_FALSE(clock.stop_requested());
  clock.stop();
  EXPECT_TRUE(clock.stop_requested());
}

TEST(TrainRunMetrics, RecordsAreAppendedAndHandedOnAfterTheyAreWritten) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  testing::write_text(path, "{\"type\":\"train\",\"step\":1}\n");
  std::vector<std::string> seen;
  {
    MetricsLog log(path, [&](const nlohmann::json& record) {
      seen.push_back(record.dump());
      EXPECT_NE(testing::read_text(path).find(record.dump()), std::string::npos);
    });
    log.write({{"type", "valid"}, {"step", 2}});
  }
  EXPECT_EQ(seen, std::vector<std::string>{"{\"step\":2,\"type\":\"valid\"}"});
  EXPECT_EQ(testing::read_text(path),
            "{\"type\":\"train\",\"step\":1}\n{\"step\":2,\"type\":\"valid\"}\n");
  MetricsLog none;  // another rank's: nothing written, nothing handed on
  none.write({{"type", "train"}});
  testing::expect_error([&] { MetricsLog(dir / "no" / "such" / "m.jsonl", {}); },
                        {"m.jsonl: cannot open for writing: "});
}

TEST(TrainRunMetrics, AResumeDropsTheRecordsOfTheUpdatesItRepeats) {
  TempDir dir;
  const auto path = dir / "metrics.jsonl";
  drop_replayed_metrics(path, 4);  // no file: nothing
  EXPECT_FALSE(std::filesystem::exists(path));
  testing::write_text(path,
                      "{\"type\":\"train\",\"step\":2}\n{\"type\":\"valid\",\"step\":4}\n"
                      "{\"type\":\"train\",\"step\":6}\nnot json\n{\"type\":\"skipped\","
                      "\"step\":5}\n");
  drop_replayed_metrics(path, 4);
  EXPECT_EQ(testing::read_text(path),
            "{\"type\":\"train\",\"step\":2}\n{\"type\":\"valid\",\"step\":4}\nnot json\n"
            "{\"dropped\":2,\"step\":4,\"type\":\"resume\"}\n");
}

}  // namespace
}  // namespace tfm::internal
