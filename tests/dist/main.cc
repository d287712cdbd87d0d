// The main of tfm_dist_tests, run as every rank of an MPI job (mpiexec -n 2, CTest's
// Dist.MpiCollectivesOnTwoRanks): every rank runs every test, so every rank calls the collectives
// in the same order. Rank 0 prints GoogleTest's output; the other ranks print only their failed
// assertions, marked with their rank. A failure on any rank fails the run on every rank.
//   tfm_dist_tests --abort-from-rank-1: rank 1 aborts the job while the others wait in a barrier
//   (CTest's Dist.MpiAbortEndsEveryRank, through expect_abort.cmake).
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <string_view>

#include "tfm/dist/communicator.h"

namespace {

// Prints a failed assertion of a rank whose default printer was removed. The test's name comes
// from OnTestStart: UnitTest::current_test_info() would deadlock here (GoogleTest holds its lock
// while it reports a result).
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s failed at %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
  std::string test_ = "(outside a test)";
};

int abort_from_rank_1(tfm::internal::dist::Communicator& comm) {
  if (comm.rank() == 1) {
    // No newline flush by hand: abort() must flush stdio itself before the launcher kills us.
    std::printf("rank 1 aborts the job with exit code 3\n");
    comm.abort(3);
  }
  comm.barrier();  // rank 1 never arrives
  std::printf("rank %d passed the barrier: the abort did not end it\n", comm.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  tfm::internal::dist::Communicator* comm = nullptr;
  try {
    comm = &tfm::internal::dist::world();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm_dist_tests: %s\n", e.what());
    return 1;
  }
  if (argc > 1 && std::string_view(argv[1]) == "--abort-from-rank-1")
    return abort_from_rank_1(*comm);

  // --gtest_shuffle must give every rank the same order: rank 0's seed for all.
  if (GTEST_FLAG_GET(shuffle)) {
    int32_t seed = GTEST_FLAG_GET(random_seed);
    if (seed == 0) seed = static_cast<int32_t>(std::time(nullptr) % 99999) + 1;
    comm->broadcast(&seed, sizeof seed, 0);
    GTEST_FLAG_SET(random_seed, seed);
  }
  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (comm->rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(comm->rank()));
  }
  const int status = RUN_ALL_TESTS();
  // A rank whose run failed without a failed test (e.g. a crash in a global tear-down) counts 1.
  const int failed = testing::UnitTest::GetInstance()->failed_test_count();
  const std::vector<uint64_t> per_rank = comm->all_gather(failed > 0 ? failed : status != 0);
  uint64_t total = 0;
  for (uint64_t n : per_rank) total += n;
  if (comm->rank() == 0) {
    if (total == 0) {
      std::printf("[  PASSED  ] every test on all %d ranks (%s)\n", comm->size(),
                  comm->describe().c_str());
    } else {
      std::printf("[  FAILED  ] failed tests per rank:");
      for (size_t r = 0; r < per_rank.size(); ++r)
        std::printf("%s rank %zu: %llu", r == 0 ? "" : ",", r,
                    static_cast<unsigned long long>(per_rank[r]));
      std::printf("\n");
    }
  }
  return total == 0 ? 0 : 1;
}
