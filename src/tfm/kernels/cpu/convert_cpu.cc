#include "tfm/kernels/cpu/convert_cpu.h"

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void f32_to_bf16(const float* src, bf16* dst, int64_t n) {
  uint16_t* out = reinterpret_cast<uint16_t*>(dst);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16_bits(src[i]);
}

void bf16_to_f32(const bf16* src, float* dst, int64_t n) {
  const uint16_t* in = reinterpret_cast<const uint16_t*>(src);
  uint32_t* out = reinterpret_cast<uint32_t*>(dst);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(in[i]) << 16;
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
