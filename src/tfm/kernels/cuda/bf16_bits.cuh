// The device's f32 -> bf16 rounding, shared by the kernels that write bf16 copies.
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

// cpu::f32_to_bf16_bits: round to nearest even on the bit pattern (add 0x7fff plus the lowest kept
// bit, then truncate); NaNs are made quiet instead of rounded, which could carry a payload into
// the exponent and make an infinity.
__device__ inline uint16_t f32_to_bf16_bits(float value) {
  const uint32_t u = __float_as_uint(value);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

}  // namespace tfm::internal::cuda
