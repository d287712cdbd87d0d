// When a CPU loop is worth splitting across OpenMP threads.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// Below this many elements of work a loop runs on the calling thread: opening a parallel region
// costs a few microseconds, more than a small loop itself.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 15;

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
