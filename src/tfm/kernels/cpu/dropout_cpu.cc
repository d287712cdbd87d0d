#include "tfm/kernels/cpu/dropout_cpu.h"

#include <algorithm>

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i)
    y[i] = dropout_keep(seed, static_cast<uint64_t>(i), p) ? x[i] * scale : 0.0f;
}

// y = m * x / (1 - p) with the mask m fixed, so dy/dx = m / (1 - p).
void dropout_backward(const float* g, float* dx, int64_t n, float p, uint64_t seed,
                      bool accumulate) {
  const float scale = 1.0f / (1.0f - p);
  if (accumulate) {
    // Each dropped gradient is stored (rounded) before it is added, as the fused sub-layer end does
    // (layer_norm_cpu.cc): in one expression the compiler may fuse the multiply and the add and
    // round once (it does for AVX2), and the two would no longer agree bit for bit.
    constexpr int64_t kChunk = 256;
#pragma omp parallel for schedule(static) if (n >= kParallelMinElements)
    for (int64_t start = 0; start < n; start += kChunk) {
      const int64_t count = std::min(kChunk, n - start);
      float dropped[kChunk];
#pragma omp simd
      for (int64_t j = 0; j < count; ++j)
        dropped[j] =
            dropout_keep(seed, static_cast<uint64_t>(start + j), p) ? g[start + j] * scale : 0.0f;
#pragma omp simd
      for (int64_t j = 0; j < count; ++j) dx[start + j] += dropped[j];
    }
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dropout_keep(seed, static_cast<uint64_t>(i), p) ? g[i] * scale : 0.0f;
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
