#include "tfm/kernels/cpu/elementwise_cpu.h"

#include <algorithm>

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::internal::cpu {

void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale) {
  if (accumulate) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dst[i] += scale * src[i];
  } else {
#pragma omp parallel for simd schedule(static) if (n >= kParallelMinElements)
    for (int64_t i = 0; i < n; ++i) dst[i] = scale * src[i];
  }
}

void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate) {
  // Threads own blocks of columns, so no two write one element.
  constexpr int64_t kBlock = 256;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    int64_t j1 = std::min(j0 + kBlock, cols);
    if (!accumulate)
      for (int64_t j = j0; j < j1; ++j) dst[j] = 0.0f;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j) dst[j] += src[r * cols + j];
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

}  // namespace tfm::internal::cpu
