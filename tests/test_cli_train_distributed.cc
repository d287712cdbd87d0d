// `mpirun -np 2 tfm train` (issue 13, docs/DISTRIBUTED.md): two ranks compute exactly the updates
// of one process with data.accumulate 2 on the same batches, resume one process's checkpoint, end
// the whole job when a rank dies or rank 0's disk is full, and refuse ranks whose recipes differ.
// Dropout is on (the recipe's 0.1): each batch's seed comes from its place in the update.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build_paths.h"
#include "data_test_util.h"
#include "tfm/ops/device.h"
#include "tfm/train/checkpoint.h"
#include "train_test_util.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::quoted;
using testing::TempDir;

#ifdef TFM_HAVE_MPI

// mpirun's options here: CI runs as root; under the asan preset LeakSanitizer would report what
// Open MPI keeps until exit (memory errors are still caught).
constexpr const char* kMpirunOptions =
    "--allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 "
    "-x ASAN_OPTIONS=detect_leaks=0";

// mpirun with 2 ranks on this machine, 1 thread each.
std::string mpirun(const std::string& tfm_arguments, int ranks = 2) {
  return fmt::format("'{}' {} -np {} '{}/tfm' {}", tfm_mpiexec(), kMpirunOptions, ranks,
                     tfm_binary_dir(), tfm_arguments);
}

testing::CommandResult run_shell(const std::string& command, const TempDir& dir) {
  const auto script = dir / "command.sh", out = dir / "stdout", err = dir / "stderr";
  testing::write_text(script, command + "\n");
  const int raw = std::system(
      fmt::format("bash {} > {} 2> {} < /dev/null", quoted(script), quoted(out), quoted(err))
          .c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, testing::read_text(out), testing::read_text(err)};
}

std::string train_arguments(const TempDir& dir, const std::string& run, const std::string& extra) {
  return fmt::format(
      "train -c {} -o {} --set training.log_every=1 --set checkpoints.every_steps=1 "
      "--set checkpoints.keep=10 --set validation.every_steps=0 {}",
      quoted(dir / "recipe.yaml"), quoted(dir / run), extra);
}

// The training losses of metrics.jsonl, one per update.
std::vector<double> logged_losses(const fs::path& run) {
  std::vector<double> losses;
  std::istringstream lines(testing::read_text(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(lines, line)) {
    const auto record = nlohmann::json::parse(line);
    if (record.value("type", "") == "train") losses.push_back(record["loss"].get<double>());
  }
  return losses;
}

// ||a - b|| <= 1e-5 ||b|| (L2 over the tensor). Not element by element: the one process adds
// the second batch's gradient inside its products (GEMM with beta = 1) while two ranks add two
// finished gradients, so each sum rounds differently, and Adam divides near-zero gradients by
// their own size, which turns those last-bit differences into 1e-4 of elements near zero.
void expect_close(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  ASSERT_EQ(x.size(), y.size()) << what;
  double difference = 0, norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    difference += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    norm += static_cast<double>(y[i]) * y[i];
  }
  EXPECT_GT(norm, 0) << what << " is all zeros";
  EXPECT_LE(std::sqrt(difference), 1e-5 * std::sqrt(norm))
      << what << ": relative difference " << std::sqrt(difference / norm);
}

void expect_same_checkpoints(const fs::path& a, const fs::path& b) {
  const Checkpoint x = load_checkpoint(a), y = load_checkpoint(b);
  EXPECT_EQ(x.state.step, y.state.step);
  EXPECT_EQ(x.state.epoch, y.state.epoch);
  EXPECT_EQ(x.state.batch_in_epoch, y.state.batch_in_epoch);
  EXPECT_EQ(x.adam_steps, y.adam_steps);
  ASSERT_EQ(x.parameters.size(), y.parameters.size());
  for (size_t i = 0; i < x.parameters.size(); ++i) {
    expect_close(x.parameters[i].second, y.parameters[i].second, x.parameters[i].first);
    expect_close(x.adam_m[i], y.adam_m[i], "m of " + x.parameters[i].first);
    expect_close(x.adam_v[i], y.adam_v[i], "v of " + x.parameters[i].first);
  }
}

void expect_same_losses(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::fabs(b[i])) << i;
}

// 2 ranks against one process with data.accumulate=2, both with `options` (e.g. the device): the
// same losses and checkpoints within the tolerances above. The 2-rank log holds `log_line`.
void expect_two_ranks_compute_the_updates_of_one_process(const std::string& options,
                                                         const std::string& log_line = "2 ranks") {
  TempDir dir;
  testing::write_recipe(dir);
  auto two = run_shell(mpirun(train_arguments(dir, "two", "--max-steps 5 " + options)), dir);
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.err.find("2 ranks"), std::string::npos) << two.err;
  EXPECT_NE(two.err.find(log_line), std::string::npos) << two.err;
  auto one = testing::run_tfm_command(
      train_arguments(dir, "one", "--max-steps 5 --set data.accumulate=2 " + options), dir);
  ASSERT_EQ(one.status, 0) << one.err;
  const std::vector<double> losses = logged_losses(dir / "one");
  ASSERT_EQ(losses.size(), 5u);
  EXPECT_GT(losses[0], losses[4]);  // it learns
  expect_same_losses(logged_losses(dir / "two"), losses);
  const auto two_checkpoints = list_checkpoints(dir / "two" / "checkpoints");
  const auto one_checkpoints = list_checkpoints(dir / "one" / "checkpoints");
  ASSERT_EQ(two_checkpoints.size(), 5u);
  ASSERT_EQ(one_checkpoints.size(), 5u);
  for (size_t i = 0; i < 5; ++i) expect_same_checkpoints(two_checkpoints[i], one_checkpoints[i]);
}

TEST(CliTrainDistributed, TwoRanksComputeTheUpdatesOfOneProcessWithAccumulateTwo) {
  expect_two_ranks_compute_the_updates_of_one_process("");
}

// Both ranks on the one GPU of the machine (rank r takes GPU r % count), the gradients summed
// through host memory over MPI: NCCL refuses two ranks on one GPU, and the ranks agree on it before
// NCCL's initialisation. Without a usable GPU the 2-rank job must fail with the reason.
TEST(CliTrainDistributed, TwoRanksOnOneGpuComputeTheUpdatesOfOneProcessWithAccumulateTwo) {
  const std::string why = ops::device_unavailable_reason(Device::cuda);
  if (!why.empty()) {
    TempDir dir;
    testing::write_recipe(dir);
    auto two = run_shell(mpirun(train_arguments(dir, "two", "--max-steps 5 --device cuda")), dir);
    EXPECT_NE(two.status, 0);
    const size_t at = two.err.find(why);
    ASSERT_NE(at, std::string::npos) << two.err;
    // On a line of a rank's own: "tfm: error: rank 1 of 2: ...".
    const size_t newline = two.err.rfind('\n', at);
    EXPECT_EQ(
        two.err.compare(newline == std::string::npos ? 0 : newline + 1, 16, "tfm: error: rank"), 0)
        << two.err;
    EXPECT_TRUE(list_checkpoints(dir / "two" / "checkpoints").empty());
    return;
  }
#ifdef TFM_HAVE_NCCL
  const std::string staged_because = "ranks 0 and 1 share a GPU of one host";
#else
  const std::string staged_because = "tfm was built without NCCL";
#endif
  expect_two_ranks_compute_the_updates_of_one_process(
      "--device cuda", "gradients: summed host-staged over MPI: " + staged_because);
}

TEST(CliTrainDistributed, TwoRanksResumeTheCheckpointOfOneProcess) {
  TempDir dir;
  testing::write_recipe(dir);
  const std::string accumulate_two = "--set data.accumulate=2";
  auto one =
      testing::run_tfm_command(train_arguments(dir, "one", "--max-steps 5 " + accumulate_two), dir);
  ASSERT_EQ(one.status, 0) << one.err;
  auto first = testing::run_tfm_command(
      train_arguments(dir, "resumed", "--max-steps 2 " + accumulate_two), dir);
  ASSERT_EQ(first.status, 0) << first.err;
  // The data position is global: 2 ranks x accumulate 1 go on where 1 x 2 stopped.
  auto rest = run_shell(mpirun(train_arguments(dir, "resumed", "--max-steps 5 --resume")), dir);
  ASSERT_EQ(rest.status, 0) << rest.err;
  EXPECT_NE(rest.err.find("resuming from"), std::string::npos) << rest.err;
  expect_same_losses(logged_losses(dir / "resumed"), logged_losses(dir / "one"));
  expect_same_checkpoints(newest_checkpoints(dir / "resumed" / "checkpoints", 1)[0],
                          newest_checkpoints(dir / "one" / "checkpoints", 1)[0]);
}

TEST(CliTrainDistributed, AKilledRankEndsTheJobAndTheLastCheckpointLoads) {
  TempDir dir;
  testing::write_recipe(dir);
  // Rank 1 is killed (SIGKILL) once rank 0 has written two checkpoints; mpirun must end the job.
  const std::string script = fmt::format(
      "{} & job=$!\n"
      "for i in $(seq 600); do [ -d {}/checkpoints/step-000000002 ] && break; sleep 0.1; done\n"
      "victim=$(grep -lza '^OMPI_COMM_WORLD_RANK=1$' /proc/[0-9]*/environ 2>/dev/null | "
      "  while read f; do p=${{f#/proc/}}; p=${{p%/environ}}; "
      "    grep -qza {} /proc/$p/cmdline 2>/dev/null && echo $p; done | head -1)\n"
      "[ -n \"$victim\" ] || {{ echo 'no rank 1 found' >&2; kill $job; exit 99; }}\n"
      "start=$(date +%s%N); kill -9 $victim; wait $job; status=$?\n"
      "echo \"$status $(( ($(date +%s%N) - start) / 1000000 ))\"\n",
      mpirun(train_arguments(dir, "run", "--max-steps 100000")), quoted(dir / "run"),
      quoted(dir / "run"));
  auto result = run_shell(script, dir);
  std::istringstream words(result.out);
  int status = 0;
  int64_t milliseconds = -1;
  words >> status >> milliseconds;
  const double seconds = static_cast<double>(milliseconds) / 1000;
  EXPECT_GE(milliseconds, 0) << result.out;
  EXPECT_NE(status, 0) << result.err;
  EXPECT_NE(status, 99) << result.err;
  EXPECT_LT(seconds, 30.0) << "the job took " << seconds << " s to end after a rank died";
  EXPECT_NE(result.err.find("signal 9"), std::string::npos) << result.err;
  auto newest = newest_checkpoints(dir / "run" / "checkpoints", 1);
  ASSERT_EQ(newest.size(), 1u);
  const Checkpoint checkpoint = load_checkpoint(newest[0]);
  EXPECT_GE(checkpoint.state.step, 2);
}

TEST(CliTrainDistributed, AFullDiskOnRankZeroEndsTheJobWithItsReason) {
  TempDir dir;
  testing::write_recipe(dir);
  // A file size limit in the ranks, as a full disk: rank 0's checkpoint write fails; the other rank
  // must not wait for it forever. (TCP between the ranks: shared-memory segments are files too.)
  const auto start = std::chrono::steady_clock::now();
  auto result = run_shell(
      fmt::format("'{}' {} --mca btl tcp,self -np 2 bash -c \"ulimit -f 64; trap '' XFSZ; "
                  "exec '{}/tfm' {}\"",
                  tfm_mpiexec(), kMpirunOptions, tfm_binary_dir(),
                  train_arguments(dir, "run", "--max-steps 1000")),
      dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.err.find("rank 0 of 2: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("File too large"), std::string::npos) << result.err;
  EXPECT_LT(seconds, 60.0);
}

TEST(CliTrainDistributed, RanksWithDifferentRecipesAreRefusedAtStartUp) {
  TempDir dir;
  testing::write_recipe(dir);
  const std::string base =
      fmt::format("'{}/tfm' {}", tfm_binary_dir(), train_arguments(dir, "run", "--max-steps 3"));
  const std::string command = fmt::format("'{}' {} -np 1 {} : -np 1 {} --set data.max_tokens=300",
                                          tfm_mpiexec(), kMpirunOptions, base, base);
  auto result = run_shell(command, dir);
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.err.find("rank 1 of 2 has a different training corpus or batching"),
            std::string::npos)
      << result.err;
  EXPECT_TRUE(list_checkpoints(dir / "run" / "checkpoints").empty());
}

TEST(CliTrainDistributed, ARankThatIsNotTrainingEndsTheJobAtStartUp) {
  // Issue 43 D24: rank 1 runs `tfm info`, which never joins MPI's start-up; rank 0 waited in
  // MPI_Init until killed. With a start-up deadline of 3 s the job ends, saying why.
  TempDir dir;
  testing::write_recipe(dir);
  const auto start = std::chrono::steady_clock::now();
  auto result = run_shell(
      fmt::format("TFM_MPI_START_TIMEOUT=3 timeout 100 '{}' {} -x TFM_MPI_START_TIMEOUT -np 1 "
                  "'{}/tfm' {} : -np 1 '{}/tfm' info -p base",
                  tfm_mpiexec(), kMpirunOptions, tfm_binary_dir(),
                  train_arguments(dir, "run", "--max-steps 3"), tfm_binary_dir()),
      dir);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.status, 124) << "the job hung: " << result.err;
  EXPECT_LT(seconds, 60.0);
  // Whichever comes first says why: rank 0's deadline, or (on a loaded machine, where rank 0 is
  // still starting when rank 1 has ended) mpiexec's report of a rank that ended without joining.
  const bool deadline_said =
      result.err.find("rank 0 of 2: the job's ranks did not all start MPI within 3 s") !=
      std::string::npos;
  const bool mpiexec_said =
      result.err.find("mpiexec has exited due to process rank 1") != std::string::npos &&
      result.err.find("exiting improperly") != std::string::npos;
  EXPECT_TRUE(deadline_said || mpiexec_said) << result.err;
}

#else

TEST(CliTrainDistributed, NeedsMpi) {
  GTEST_SKIP() << "tfm was built without MPI (libopenmpi-dev): the multi-rank tests cannot run";
}

#endif

}  // namespace
}  // namespace tfm::internal
