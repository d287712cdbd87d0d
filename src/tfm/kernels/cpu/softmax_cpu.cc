#include "tfm/kernels/cpu/softmax_cpu.h"

#include <cmath>
#include <limits>

#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void softmax_row(const float* x, float* y, int64_t n) {
  const float max = max_of(x, n);
  const float inv = 1.0f / sum_exp(x, n, max, y);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

// y_i = e^{x_i} / sum_k e^{x_k}, so dy_i/dx_j = y_i (delta_ij - y_j) and
// dx_j = sum_i g_i y_i (delta_ij - y_j) = y_j (g_j - sum_i g_i y_i).
void softmax_backward_row(const float* y, const float* g, float* dx, int64_t n, bool accumulate) {
  float dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < n; ++j) dot += g[j] * y[j];
  if (accumulate) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] += y[j] * (g[j] - dot);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] = y[j] * (g[j] - dot);
  }
}

void softmax(const float* x, float* y, int64_t rows, int64_t n) {
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n);
}

void softmax_backward(const float* y, const float* g, float* dx, int64_t rows, int64_t n,
                      bool accumulate) {
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r)
    softmax_backward_row(y + r * n, g + r * n, dx + r * n, n, accumulate);
}

void log_softmax(const float* x, float* y, int64_t rows, int64_t n) {
  // log softmax(x)_j = x_j - m - log(sum_i exp(x_i - m)) with m = max x: exact for any row whose
  // maximum is finite, and no probability underflows to log(0).
#pragma omp parallel for schedule(static) if (rows * n >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    float* out = y + r * n;
    const float max = max_of(row, n);
    const float log_norm = max + std::log(sum_exp(row, n, max));
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[j] = row[j] - log_norm;
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
