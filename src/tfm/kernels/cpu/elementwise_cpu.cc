#include "tfm/kernels/cpu/elementwise_cpu.h"

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::cpu {

void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dst[i] += scale * src[i];
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dst[i] = scale * src[i];
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void relu(const float* x, float* y, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(const float* y, const float* g, float* dx, int64_t n, bool accumulate) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] += y[i] > 0.0f ? g[i] : 0.0f;
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? g[i] : 0.0f;
  }
}

}  // namespace tfm::cpu
