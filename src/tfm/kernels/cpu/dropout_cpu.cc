#include "tfm/kernels/cpu/dropout_cpu.h"

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::cpu {

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
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i)
      dx[i] += dropout_keep(seed, static_cast<uint64_t>(i), p) ? g[i] * scale : 0.0f;
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dropout_keep(seed, static_cast<uint64_t>(i), p) ? g[i] * scale : 0.0f;
  }
}

}  // namespace tfm::cpu
