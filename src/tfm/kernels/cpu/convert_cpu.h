// Element-type conversions for the mixed-precision products.
#pragma once

#include <cstdint>
#include <cstring>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The bits of float_to_bf16(value), without branches so that loops over it vectorise. Round to
// nearest even on the bit pattern: add 0x7fff plus the lowest kept bit, then truncate; NaNs are
// made quiet instead of rounded (rounding could carry a NaN's payload into the exponent and make it
// an infinity).
inline uint16_t f32_to_bf16_bits(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof(u));
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// dst[i] = src[i] rounded to the nearest bf16 (ties to even; NaN stays NaN), as float_to_bf16.
void f32_to_bf16(const float* src, bf16* dst, int64_t n);

// dst[i] = src[i] as f32, exactly (a bf16 is the high half of its f32).
void bf16_to_f32(const bf16* src, float* dst, int64_t n);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
