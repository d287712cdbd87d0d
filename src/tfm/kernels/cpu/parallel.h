// When a CPU loop is worth splitting across OpenMP threads.
#pragma once

#include <cstdint>

namespace tfm::internal::cpu {

// Below this many elements of work a loop runs on the calling thread: opening a parallel region
// costs a few microseconds, more than a small loop itself.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 15;

}  // namespace tfm::internal::cpu
