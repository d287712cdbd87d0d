#include "tfm/kernels/cpu/optimizer_cpu.h"

#include <algorithm>
#include <cmath>

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void adam_step(float* p, float* m, float* v, const float* g, int64_t n, const AdamStep& step) {
  const float b1 = step.beta1, b2 = step.beta2, step_size = step.step_size;
  const float inv_sqrt_bc2 = step.inv_sqrt_bc2, eps = step.eps, keep = step.keep;
#pragma omp parallel for simd schedule(static) if (n > 32768)
  for (int64_t j = 0; j < n; ++j) {
    m[j] = b1 * m[j] + (1.0f - b1) * g[j];
    v[j] = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
    // keep p is exactly p when keep is 1 (no weight decay).
    p[j] = keep * p[j] - step_size * m[j] / (std::sqrt(v[j]) * inv_sqrt_bc2 + eps);
  }
}

double sum_squares(const float* x, int64_t n) {
  // `simd` lets each thread keep one partial sum a vector lane (the order of the additions is then
  // fixed by n, the threads and the lane count): without it the sum is one chain of dependent
  // double additions, one element every add's latency, about 4 GB/s.
  double s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

void scale(float* x, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void fill(float* x, int64_t n, float value) {
  std::fill(x, x + n, value);
}

void moving_average(float* average, const float* x, int64_t n, float decay) {
  // As a + (1 - d) (x - a): an average equal to x stays exactly x.
  const float rate = 1.0f - decay;
  for (int64_t i = 0; i < n; ++i) average[i] += rate * (x[i] - average[i]);
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
