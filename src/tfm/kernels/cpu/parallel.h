// When a CPU loop is worth splitting across OpenMP threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "tfm/core/integer_math.h"
#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// Below this many elements of work a loop runs on the calling thread: opening a parallel region
// costs a few microseconds, more than a small loop itself.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 15;

// Rows [begin, end) of thread t of `threads` under `schedule(static)` (chunks of ceil(m /
// threads)), as the ops that share rows among the threads take them (layer norm, attention,
// quantisation).
inline std::pair<int64_t, int64_t> static_rows(int64_t m, int t, int threads) {
  const int64_t chunk = ceil_div(m, threads);
  return {std::min(m, t * chunk), std::min(m, (t + 1) * chunk)};
}

// From this many rows a thread, the panel kernels' threads (panel_matmul_cpu.cc, panel_int8_cpu.cc)
// each take their static_rows of every panel rather than their own panels for every row: in a
// decoding step those are the rows that the same thread's layer norm, attention and quantisation
// wrote and will read next, so no row's lines move between the cores' caches and the int8 products
// need no barrier after their quantisation; each thread reads the whole weight, both at about the
// same time. With fewer rows the weights' streaming bounds the product and sharing out the panels
// is faster (beam-4 decodes of 128 and 96 rows against 64, greedy ones of 32:
// docs/journal/2026-12-06-rows-stay-on-their-core.md).
inline constexpr int64_t kRowsPerThreadToSplitRows = 48;

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
