// How much of a product each OpenMP thread takes, when the threads do not all run at one speed.
//
// The cores a process gets need not run at one rate: a VM's vCPU may share its physical core with
// another guest, a hybrid CPU has cores of two speeds, another process may take part of one core.
// Under an equal split the faster threads then wait for the slowest at the end of every product
// (on a 2-vCPU VM, 3-8% of a training product's time when one vCPU ran 5-16% slower:
// docs/journal/2026-12-04-uneven-cores.md). The blocked products therefore give each thread a
// share of the rows or columns in proportion to its rate as measured on the products before: each
// product times its threads' blocks (work / seconds), and a thread's rate follows those
// measurements by an exponential average. Which thread computes an element never changes its
// value: every element is the same sum in the same order, whatever the split. TFM_CPU_SPLIT=even
// in the environment keeps the even split.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

class ThreadShares {
 public:
  static constexpr int kMaxThreads = 64;

  // measured false: every thread keeps rate 1 (an even split) whatever record() is told.
  explicit ThreadShares(bool measured = true) : measured_(measured) { reset(); }
  bool measured() const { return measured_; }

  // The first index of each of `threads` consecutive parts of [0, size), in whole multiples of
  // `grain` (size itself excepted), part i's length in proportion to thread i's rate:
  // bounds[0] = 0, ..., bounds[threads] = size. Parts may be empty when size is small.
  void bounds(int threads, int64_t size, int64_t grain, int64_t* bounds) const {
    double total = 0;
    for (int i = 0; i < threads; ++i) total += rate(i);
    double cumulative = 0;
    bounds[0] = 0;
    for (int i = 1; i < threads; ++i) {
      cumulative += rate(i - 1);
      const auto at = static_cast<int64_t>(static_cast<double>(size) * cumulative / total);
      const int64_t rounded = (at + grain / 2) / grain * grain;
      bounds[i] = std::clamp(rounded, bounds[i - 1], size);
    }
    bounds[threads] = size;
  }

  // Thread i did work[i] units (any unit, the same for all) in seconds[i]. A product shorter than
  // kMinSeconds is left out: its timing is mostly the timer's and the region's own cost.
  void record(int threads, const double* work, const double* seconds) {
    if (!measured_ || threads < 2 || threads > kMaxThreads) return;
    double longest = 0, total_rate = 0;
    for (int i = 0; i < threads; ++i) {
      if (work[i] <= 0 || seconds[i] <= 0) return;  // an empty part: nothing learned
      longest = std::max(longest, seconds[i]);
      total_rate += work[i] / seconds[i];
    }
    if (longest < kMinSeconds) return;
    // Each thread's measured rate relative to the mean (1), limited to [0.5, 1.5] (a thread 3x
    // slower than another at most) so that one stray measurement (a thread preempted for a while)
    // moves a running rate by at most an eighth, then averaged into its running rate.
    for (int i = 0; i < threads; ++i) {
      const double measured = std::clamp(threads * (work[i] / seconds[i]) / total_rate, 0.5, 1.5);
      const double updated = (1 - kWeight) * rate(i) + kWeight * measured;
      rates_[i].store(static_cast<float>(updated), std::memory_order_relaxed);
    }
  }

  // Sets every thread's rate (tests: an uneven split on purpose).
  void set_rates(int threads, const double* rates) {
    for (int i = 0; i < threads && i < kMaxThreads; ++i)
      rates_[i].store(static_cast<float>(rates[i]), std::memory_order_relaxed);
  }
  void reset() {
    for (auto& r : rates_) r.store(1.0f, std::memory_order_relaxed);
  }

 private:
  static constexpr double kMinSeconds = 100e-6;
  // A new measurement's weight: a rate that changes settles within about 10 products.
  static constexpr double kWeight = 0.25;

  // Threads past kMaxThreads keep rate 1.
  double rate(int i) const {
    return i < kMaxThreads ? rates_[i].load(std::memory_order_relaxed) : 1.0;
  }

  // Relaxed atomics: products on several host threads at once (a server) may record at the same
  // time; a lost update only costs speed, never a result.
  const bool measured_;
  std::atomic<float> rates_[kMaxThreads];
};

// The shares of the blocked products (blocked_gemm_driver.h): measured, unless the environment
// has TFM_CPU_SPLIT=even (to compare the two, or to rule the measuring out).
inline ThreadShares& product_thread_shares() {
  static ThreadShares shares([] {
    const char* choice = environment_choice("TFM_CPU_SPLIT", {"even", "measured"});
    return choice == nullptr || std::string_view(choice) != "even";
  }());
  return shares;
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
