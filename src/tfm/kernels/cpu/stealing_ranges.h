// Items shared out among OpenMP threads that need not run at one speed, for the decoding step's
// short products (panel_matmul_cpu.cc, log_softmax_top_cpu.cc).
//
// A decoding step is ~90 short parallel regions. Under an equal static split the faster thread
// waits for the slower at the end of each: on a 2-vCPU VM one vCPU often runs 10-35% slower than
// the other for seconds at a time, which vCPU changing, and greedy decoding lost 7-17% of its
// products' time that way (docs/journal/2026-12-04-decode-stealing.md). A measured split
// (thread_shares.h) follows such a change only over several products, and would change the
// bits of log_softmax_top's sums. Here each thread starts with an equal contiguous range of the
// items and takes them in ascending order (the weights stream in order, as the prefetching
// expects); a thread whose range is empty takes the last item of the range with the most items
// left, one at a time. Each item is computed whole by one thread, so which thread takes it never
// changes a result.
#pragma once

#include <atomic>
#include <cstdint>

#include "tfm/core/error.h"
#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

class StealingRanges {
 public:
  static constexpr int kMaxThreads = 64;

  // Items [0, count) in `threads` equal contiguous ranges (threads past kMaxThreads get none and
  // only take from the others). steal false: each thread takes its own range only (the static
  // split, for comparison: TFM_CPU_SPLIT=even).
  StealingRanges(int64_t count, int threads, bool steal = true)
      : threads_(threads < kMaxThreads ? threads : kMaxThreads), steal_(steal) {
    TFM_CHECK(count >= 0 && count < (int64_t{1} << 32) && threads >= 1,
              "StealingRanges: {} items for {} threads", count, threads);
    for (int t = 0; t < threads_; ++t) {
      const int64_t begin = count * t / threads_, end = count * (t + 1) / threads_;
      ranges_[t].bounds.store(pack(begin, end), std::memory_order_relaxed);
    }
  }

  // The next item for thread `thread` (its omp_get_thread_num()), or -1 when every item is
  // taken. A team smaller than `threads` is fine: the missing threads' items are taken by the
  // others; a larger one too: the extra threads only take from the others.
  int64_t next(int thread) {
    if (thread >= 0 && thread < threads_) {
      const int64_t own = take(ranges_[thread], /*front=*/true);
      if (own >= 0 || !steal_) return own;
    } else if (!steal_) {
      return -1;
    }
    for (;;) {
      int victim = -1;
      int64_t most = 0;
      for (int t = 0; t < threads_; ++t) {
        const uint64_t bounds = ranges_[t].bounds.load(std::memory_order_relaxed);
        if (end_of(bounds) - begin_of(bounds) > most) {
          most = end_of(bounds) - begin_of(bounds);
          victim = t;
        }
      }
      if (victim < 0) return -1;
      const int64_t item = take(ranges_[victim], /*front=*/false);
      if (item >= 0) return item;  // else the victim's last items went meanwhile: look again
    }
  }

 private:
  // A range [begin, end) as one 64-bit word, begin in the low half, so that its owner (taking
  // from the front) and another thread (taking from the back) never take one item twice.
  struct alignas(64) Range {
    std::atomic<uint64_t> bounds{0};
  };
  static uint64_t pack(int64_t begin, int64_t end) {
    return static_cast<uint64_t>(begin) | static_cast<uint64_t>(end) << 32;
  }
  static int64_t begin_of(uint64_t bounds) { return static_cast<int64_t>(bounds & 0xffffffffu); }
  static int64_t end_of(uint64_t bounds) { return static_cast<int64_t>(bounds >> 32); }

  // Takes the first (front) or last item of `range`, or returns -1 when it is empty.
  static int64_t take(Range& range, bool front) {
    uint64_t bounds = range.bounds.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t begin = begin_of(bounds), end = end_of(bounds);
      if (begin >= end) return -1;
      const uint64_t taken = front ? pack(begin + 1, end) : pack(begin, end - 1);
      if (range.bounds.compare_exchange_weak(bounds, taken, std::memory_order_acq_rel,
                                             std::memory_order_relaxed))
        return front ? begin : end - 1;
    }
  }

  const int threads_;
  const bool steal_;
  Range ranges_[kMaxThreads];
};

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
