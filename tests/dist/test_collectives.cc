// The MPI communicator between real processes (tfm_dist_tests under mpiexec). Each rank's data is
// random from a seed of (test, rank), so every rank can make every other rank's data and hence the
// expected result by itself. Every rank calls the same collectives in the same order whatever its
// assertions find (EXPECT, never ASSERT before a collective), or a failure would hang the job.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/dist/communicator.h"
#include "tfm/dist/mpi_communicator.h"

namespace tfm::internal::dist {
namespace {

using Clock = std::chrono::steady_clock;

Communicator& comm() {
  return world();
}

// Rank `rank`'s buffer for test `salt`: uniform in [-1, 1).
template <typename T>
std::vector<T> rank_data(int rank, size_t n, uint64_t salt) {
  std::mt19937_64 generator(salt * 1000003 + static_cast<uint64_t>(rank));
  std::uniform_real_distribution<T> uniform(-1, 1);
  std::vector<T> data(n);
  for (T& x : data) x = uniform(generator);
  return data;
}

template <typename T>
std::vector<double> expected_sum(size_t n, uint64_t salt) {
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < comm().size(); ++r) {
    std::vector<T> data = rank_data<T>(r, n, salt);
    for (size_t i = 0; i < n; ++i) sum[i] += data[i];
  }
  return sum;
}

// Whether every rank holds the same bytes (a collective): replicas of a model stay identical
// only if every rank gets the very same sum, not just a close one.
bool same_bytes_on_every_rank(const void* data, size_t bytes) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (size_t i = 0; i < bytes; ++i)
    hash = (hash ^ static_cast<const uint8_t*>(data)[i]) * 1099511628211ull;
  for (uint64_t other : comm().all_gather(hash))
    if (other != hash) return false;
  return true;
}

// Checks a sum against the expected one: the order of MPI's additions is its own, so within
// `tolerance` per rank.
template <typename T>
void expect_sum(std::span<const T> got, uint64_t salt, double tolerance) {
  const std::vector<double> expected = expected_sum<T>(got.size(), salt);
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - expected[i]) <= tolerance * comm().size()) && bad++ == 0) first_bad = i;
  EXPECT_EQ(bad, 0u) << "of " << got.size() << " elements (salt " << salt << "), first at "
                     << first_bad << ": " << (bad ? got[first_bad] : 0) << " vs "
                     << (bad ? expected[first_bad] : 0);
  EXPECT_TRUE(same_bytes_on_every_rank(got.data(), got.size_bytes())) << got.size() << " elements";
}

// 0, 1, 7, 1000 elements, and a few MB (not a multiple of any chunk or vector width).
const size_t kSizes[] = {0, 1, 7, 1000, (3 << 20) + 5};

TEST(DistMpi, RankAndSizeAgreeWithTheLauncherAndTheHost) {
  LaunchInfo launch = launch_info();
  EXPECT_GE(comm().size(), 2);
  EXPECT_EQ(comm().rank(), launch.rank);
  EXPECT_EQ(comm().size(), launch.size);
  EXPECT_NE(launch.launcher, "");
  // The hosts, counted here from each rank's host name.
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::set<uint64_t> hosts;
  for (uint64_t hash : comm().all_gather(std::hash<std::string>{}(name))) hosts.insert(hash);
  const std::string described = comm().describe();
  EXPECT_EQ(described.rfind("MPI (", 0), 0u) << described;
  EXPECT_NE(described.find(fmt::format("{} ranks on {} host{}", comm().size(), hosts.size(),
                                       hosts.size() == 1 ? "" : "s")),
            std::string::npos)
      << described;
  if (comm().rank() == 0) std::printf("%s\n", described.c_str());
}

TEST(DistMpi, AllReduceSumsFloatBuffersOfEverySize) {
  for (size_t n : kSizes) {
    std::vector<float> data = rank_data<float>(comm().rank(), n, n + 1);
    comm().all_reduce_sum(std::span<float>(data));
    expect_sum<float>(data, n + 1, 1e-6);
  }
}

TEST(DistMpi, AllReduceSumsDoubleBuffersOfEverySize) {
  for (size_t n : kSizes) {
    std::vector<double> data = rank_data<double>(comm().rank(), n, n + 2);
    comm().all_reduce_sum(std::span<double>(data));
    expect_sum<double>(data, n + 2, 1e-15);
  }
}

TEST(DistMpi, AsynchronousAllReducesStartedInARowAllArrive) {
  const size_t sizes[] = {1000, 7, (1 << 20) + 3, 0, 1, 250000};
  std::vector<std::vector<float>> buckets;
  for (size_t i = 0; i < std::size(sizes); ++i)
    buckets.push_back(rank_data<float>(comm().rank(), sizes[i], 100 + i));
  for (std::vector<float>& bucket : buckets) {
    comm().start_all_reduce_sum(bucket);
    comm().progress();  // between the steps of a backward pass
    comm().progress();
  }
  comm().wait_all();
  for (size_t i = 0; i < buckets.size(); ++i) expect_sum<float>(buckets[i], 100 + i, 1e-6);
  // Nothing outstanding: both return at once.
  comm().progress();
  comm().wait_all();
}

TEST(DistMpi, ProgressNeverWaitsForTheOtherRanks) {
  // The last rank starts its reduction 600 ms late; the others poll progress() meanwhile. Were
  // progress() to block until the reduction is done, one call would take those 600 ms.
  std::vector<float> data = rank_data<float>(comm().rank(), 100000, 200);
  const bool late = comm().rank() == comm().size() - 1;
  comm().barrier();  // all start together
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(600));
  comm().start_all_reduce_sum(data);
  double longest_ms = 0;
  int calls = 0;
  for (const auto start = Clock::now();
       !late && Clock::now() - start < std::chrono::milliseconds(300); ++calls) {
    const auto before = Clock::now();
    comm().progress();
    longest_ms = std::max(longest_ms,
                          std::chrono::duration<double, std::milli>(Clock::now() - before).count());
  }
  comm().wait_all();
  expect_sum<float>(data, 200, 1e-6);
  if (!late) {
    EXPECT_GT(calls, 10);
    EXPECT_LT(longest_ms, 150) << "one progress() call took " << longest_ms << " ms";
  }
}

TEST(DistMpi, BroadcastSendsTheRootsBytesToEveryRank) {
  for (int root : {0, 1, comm().size() - 1}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{(5 << 20) + 3}}) {
      const uint64_t salt = 300 + n + static_cast<uint64_t>(root);
      std::vector<double> data = rank_data<double>(comm().rank(), n, salt);
      comm().broadcast(data.data(), data.size() * sizeof(double), root);
      const std::vector<double> expected = rank_data<double>(root, n, salt);
      EXPECT_TRUE(data == expected) << n << " doubles from rank " << root;
    }
  }
}

TEST(DistMpi, BroadcastFromARankOutsideTheJobFails) {
  char byte = 0;
  EXPECT_THROW(comm().broadcast(&byte, 1, comm().size()), Error);  // before any MPI call
  EXPECT_THROW(comm().broadcast(&byte, 1, -1), Error);
}

TEST(DistMpi, AllGatherGivesEveryRanksValueInRankOrder) {
  const uint64_t mine = ~uint64_t{0} - 1000003 * static_cast<uint64_t>(comm().rank());
  const std::vector<uint64_t> all = comm().all_gather(mine);
  ASSERT_EQ(all.size(), static_cast<size_t>(comm().size()));
  for (int r = 0; r < comm().size(); ++r)
    EXPECT_EQ(all[r], ~uint64_t{0} - 1000003 * static_cast<uint64_t>(r));
}

TEST(DistMpi, BarrierWaitsForTheLastRank) {
  const bool late = comm().rank() == comm().size() - 1;
  comm().barrier();  // all start together
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto start = Clock::now();
  comm().barrier();
  const double waited_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!late) {
    EXPECT_GT(waited_ms, 250) << "rank " << comm().rank() << " left the barrier early";
  }
}

TEST(DistMpi, BuffersLongerThanOneMpiMessageGoInSeveralCalls) {
  // At most 100 elements (bytes for a broadcast) per MPI call, as INT_MAX is for real buffers.
  std::unique_ptr<Communicator> small = make_mpi(100);
  EXPECT_EQ(small->rank(), comm().rank());
  std::vector<float> blocking = rank_data<float>(comm().rank(), 1007, 400);
  small->all_reduce_sum(std::span<float>(blocking));
  expect_sum<float>(blocking, 400, 1e-6);
  std::vector<double> doubles = rank_data<double>(comm().rank(), 250, 401);
  small->all_reduce_sum(std::span<double>(doubles));
  expect_sum<double>(doubles, 401, 1e-15);
  std::vector<float> a = rank_data<float>(comm().rank(), 350, 402);
  std::vector<float> b = rank_data<float>(comm().rank(), 100, 403);
  small->start_all_reduce_sum(a);
  small->progress();
  small->start_all_reduce_sum(b);
  small->wait_all();
  expect_sum<float>(a, 402, 1e-6);
  expect_sum<float>(b, 403, 1e-6);
  std::vector<double> bytes = rank_data<double>(comm().rank(), 99, 404);  // 792 bytes
  small->broadcast(bytes.data(), bytes.size() * sizeof(double), 1);
  EXPECT_TRUE(bytes == rank_data<double>(1, 99, 404));
}

}  // namespace
}  // namespace tfm::internal::dist
