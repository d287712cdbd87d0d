// The threads' shares of a blocked product (kernels/cpu/thread_shares.h): the parts follow the
// rates, in whole grains; measurements move a thread's rate towards its measured one and short
// products are left out (and all are, with TFM_CPU_SPLIT=even); and an uneven split gives the
// blocked kernels (f32, bf16, bf16 widened) the same bits as an even one and as one thread.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <random>
#include <vector>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/thread_shares.h"

namespace tfm::internal {
namespace {

using cpu::ThreadShares;

TEST(ThreadShares, PartsFollowTheRatesInWholeGrains) {
  ThreadShares shares;
  int64_t even[3], uneven[3], three[4];
  shares.bounds(2, 1000, 14, even);
  EXPECT_EQ(even[0], 0);
  EXPECT_EQ(even[1], 504);  // 500 to the nearest multiple of 14
  EXPECT_EQ(even[2], 1000);
  const double one_to_three[] = {1.0, 3.0};
  shares.set_rates(2, one_to_three);
  shares.bounds(2, 1000, 14, uneven);
  EXPECT_EQ(uneven[1], 252);  // 250
  EXPECT_EQ(uneven[2], 1000);
  const double rates[] = {1.0, 1.0, 2.0};
  shares.set_rates(3, rates);
  shares.bounds(3, 64, 32, three);  // 16 and 32 to the nearest multiple of 32: part 1 is empty
  EXPECT_EQ(three[0], 0);
  EXPECT_EQ(three[1], 32);
  EXPECT_EQ(three[2], 32);
  EXPECT_EQ(three[3], 64);
}

TEST(ThreadShares, MeasurementsMoveTheRatesAndShortProductsAreLeftOut) {
  ThreadShares shares;
  int64_t bounds[3];
  // Thread 1 took twice as long for the same work: its measured rate is 2/3 of the mean, thread
  // 0's 4/3; each measurement moves the running rates a quarter of the way.
  const double work[] = {100.0, 100.0}, seconds[] = {0.01, 0.02};
  for (int i = 0; i < 40; ++i) shares.record(2, work, seconds);
  shares.bounds(2, 3000, 1, bounds);
  EXPECT_NEAR(static_cast<double>(bounds[1]), 2000.0, 2.0);
  // Shorter than 100 microseconds: nothing changes.
  const double fast[] = {1e-6, 5e-5};
  for (int i = 0; i < 40; ++i) shares.record(2, work, fast);
  shares.bounds(2, 3000, 1, bounds);
  EXPECT_NEAR(static_cast<double>(bounds[1]), 2000.0, 2.0);
  // An empty part teaches nothing either.
  const double no_work[] = {0.0, 100.0};
  shares.record(2, no_work, seconds);
  shares.bounds(2, 3000, 1, bounds);
  EXPECT_NEAR(static_cast<double>(bounds[1]), 2000.0, 2.0);
  // TFM_CPU_SPLIT=even's shares learn nothing.
  ThreadShares even(false);
  for (int i = 0; i < 40; ++i) even.record(2, work, seconds);
  even.bounds(2, 3000, 1, bounds);
  EXPECT_EQ(bounds[1], 1500);
}

// c = a b^T (+ bias) (+ c) with the kernel `which` (0 f32, 1 bf16, 2 bf16 widened), on the
// threads there are.
std::vector<float> product(int which, int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                           const std::vector<float>& b, const std::vector<float>& bias,
                           const std::vector<float>& c_old) {
  std::vector<float> c = c_old;
  if (which == 0) {
    cpu::blocked_gemm_f32(m, n, k, {a.data(), k, 1}, {b.data(), 1, k}, bias.data(), true, false,
                          c.data(), n);
    return c;
  }
  std::vector<bf16> a16, b16;
  for (float v : a) a16.push_back(float_to_bf16(v));
  for (float v : b) b16.push_back(float_to_bf16(v));
  auto kernel = which == 1 ? cpu::blocked_gemm_bf16 : cpu::blocked_gemm_bf16_widened;
  kernel(m, n, k, {a16.data(), k, 1}, {b16.data(), 1, k}, bias.data(), true, true, c.data(), n);
  return c;
}

TEST(ThreadShares, AnUnevenSplitGivesTheBlockedKernelsTheSameBits) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto values = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = uniform(rng);
    return v;
  };
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  ThreadShares& shares = cpu::product_thread_shares();
  // Tall (the threads split the rows) and wide (the columns), off the tiles.
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& s : {Shape{601, 70, 300}, Shape{40, 1100, 300}}) {
    const auto a = values(s.m * s.k), b = values(s.n * s.k), bias = values(s.n),
               c_old = values(s.m * s.n);
    for (int which = 0; which < 3; ++which) {
      if (which == 1 && !cpu::blocked_gemm_bf16_available()) continue;
      SCOPED_TRACE(testing::Message() << "m " << s.m << " n " << s.n << " kernel " << which);
      shares.reset();
      const auto even = product(which, s.m, s.n, s.k, a, b, bias, c_old);
      for (const double first : {0.2, 5.0}) {
        const double rates[] = {first, 1.0};
        shares.set_rates(2, rates);
        EXPECT_EQ(product(which, s.m, s.n, s.k, a, b, bias, c_old), even);
      }
      omp_set_num_threads(1);
      EXPECT_EQ(product(which, s.m, s.n, s.k, a, b, bias, c_old), even);
      omp_set_num_threads(2);
      // Not only zeros or ReLU's cuts: the sums are there.
      EXPECT_GT(std::count_if(even.begin(), even.end(), [](float v) { return v > 0.5f; }), 100);
    }
  }
  shares.reset();
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace tfm::internal
