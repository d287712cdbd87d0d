// The one-process side of dist/: which job a launcher's environment describes, and the
// one-process communicator. The MPI collectives run between processes in tests/dist.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/dist/communicator.h"

namespace tfm::internal::dist {
namespace {

// Every launcher variable launch_info() reads, unset for the test and restored after it.
class DistLaunch : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_RANK",
                                           "OMPI_COMM_WORLD_SIZE",
                                           "PMIX_RANK",
                                           "PMIX_SIZE",
                                           "PMI_RANK",
                                           "PMI_SIZE",
                                           "SLURM_PROCID",
                                           "SLURM_STEP_NUM_TASKS"};
  void SetUp() override {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_)
      value ? ::setenv(name, value->c_str(), 1) : ::unsetenv(name);
  }
  static void set(const char* rank_name, const char* rank, const char* size_name,
                  const char* size) {
    ::setenv(rank_name, rank, 1);
    ::setenv(size_name, size, 1);
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(DistLaunch, NoLauncherIsOneProcess) {
  LaunchInfo info = launch_info();
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.launcher, "");
}

TEST_F(DistLaunch, ReadsEachLaunchersVariables) {
  struct Case {
    const char *rank_name, *size_name, *launcher;
  };
  for (const Case& c :
       {Case{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun (Open MPI)"},
        Case{"PMIX_RANK", "PMIX_SIZE", "PMIx"}, Case{"PMI_RANK", "PMI_SIZE", "PMI (MPICH)"},
        Case{"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "srun (Slurm)"}}) {
    set(c.rank_name, "3", c.size_name, "8");
    LaunchInfo info = launch_info();
    EXPECT_EQ(info.rank, 3) << c.launcher;
    EXPECT_EQ(info.size, 8) << c.launcher;
    EXPECT_EQ(info.launcher, c.launcher);
    ::unsetenv(c.rank_name);
    ::unsetenv(c.size_name);
  }
}

TEST_F(DistLaunch, OpenMpisOwnVariablesComeBeforeSlurms) {
  // mpirun inside a Slurm allocation: SLURM_* describe the allocation's tasks, not the MPI job.
  set("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "16");
  set("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "4");
  LaunchInfo info = launch_info();
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.launcher, "mpirun (Open MPI)");
}

TEST_F(DistLaunch, IgnoresVariablesThatAreNotANumberOrIncomplete) {
  set("OMPI_COMM_WORLD_RANK", "1x", "OMPI_COMM_WORLD_SIZE", "4");
  set("PMIX_RANK", "-1", "PMIX_SIZE", "4");
  set("PMI_RANK", "0", "PMI_SIZE", "0");
  ::setenv("SLURM_PROCID", "", 1);
  ::setenv("SLURM_STEP_NUM_TASKS", "2", 1);
  LaunchInfo info = launch_info();
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.launcher, "");
  set("SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "2");  // the one complete pair
  EXPECT_EQ(launch_info().launcher, "srun (Slurm)");
  EXPECT_EQ(launch_info().rank, 1);
}

TEST_F(DistLaunch, WorldOfAProcessStartedAloneIsOneProcess) {
  Communicator& job = world();
  EXPECT_EQ(job.rank(), 0);
  EXPECT_EQ(job.size(), 1);
  EXPECT_EQ(job.describe(), "one process");
  EXPECT_EQ(&job, &world());  // made once
}

#ifndef TFM_HAVE_MPI
TEST_F(DistLaunch, SeveralRanksWithoutMpiFail) {
  // In a fresh process ("threadsafe" death tests re-run this test alone), since world() is made
  // once and an earlier test in this process may have made it.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        set("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2");
        try {
          world();
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(1),
      "rank 1 of 2 started by mpirun \\(Open MPI\\), but tfm was built without MPI");
}
#endif

TEST(DistSingleProcess, EveryCollectiveIsTheIdentity) {
  std::unique_ptr<Communicator> one = make_single_process();
  EXPECT_EQ(one->rank(), 0);
  EXPECT_EQ(one->size(), 1);
  std::vector<float> floats = {1.5f, -2.0f, 3.25f};
  one->all_reduce_sum(std::span<float>(floats));
  EXPECT_EQ(floats, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  std::vector<double> doubles = {0.1, 1e300};
  one->all_reduce_sum(std::span<double>(doubles));
  EXPECT_EQ(doubles, (std::vector<double>{0.1, 1e300}));
  EXPECT_EQ(one->all_gather(42), std::vector<uint64_t>{42});
  std::string bytes = "root's bytes";
  one->broadcast(bytes.data(), bytes.size(), 0);
  EXPECT_EQ(bytes, "root's bytes");
  one->barrier();
  one->start_all_reduce_sum(std::span<float>(floats));
  one->progress();
  one->wait_all();
  EXPECT_EQ(floats, (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

}  // namespace
}  // namespace tfm::internal::dist
