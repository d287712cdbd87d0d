// Element-type conversions on device arrays (convert_cpu.h on the GPU).
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"

namespace tfm::internal::cuda {

// dst[i] = src[i] rounded to the nearest bf16 (ties to even; NaN stays NaN, made quiet): the bits
// of cpu::f32_to_bf16_bits, so both devices give the same bf16 values.
void f32_to_bf16(const float* src, bf16* dst, int64_t n);

}  // namespace tfm::internal::cuda
