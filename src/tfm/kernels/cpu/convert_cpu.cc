#include "tfm/kernels/cpu/convert_cpu.h"

#include <cstring>

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::cpu {

void f32_to_bf16(const float* src, bf16* dst, int64_t n) {
  // Round to nearest even on the bit pattern: add 0x7fff plus the lowest kept bit, then truncate.
  // Written without branches so that the loop vectorises; NaNs are made quiet instead of rounded
  // (rounding could carry a NaN's payload into the exponent and make it an infinity).
  uint16_t* out = reinterpret_cast<uint16_t*>(dst);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &src[i], sizeof(u));
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    out[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

}  // namespace tfm::cpu
