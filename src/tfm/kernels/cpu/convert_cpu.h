// Element-type conversions for the mixed-precision products.
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"

namespace tfm::cpu {

// dst[i] = src[i] rounded to the nearest bf16 (ties to even; NaN stays NaN), as float_to_bf16.
void f32_to_bf16(const float* src, bf16* dst, int64_t n);

}  // namespace tfm::cpu
