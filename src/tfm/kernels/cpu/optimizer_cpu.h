// Optimizer kernels: the Adam update and the pieces of gradient clipping by global norm.
#pragma once

#include <cstdint>

namespace tfm::cpu {

struct AdamStep {
  float beta1 = 0.9f, beta2 = 0.98f;
  float step_size = 0.0f;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float eps = 1e-9f;
};

//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= step_size m / (sqrt(v) inv_sqrt_bc2 +
//   eps)
void adam_step(float* p, float* m, float* v, const float* g, int64_t n, const AdamStep& step);

// sum_i x_i^2, accumulated in double.
double sum_squares(const float* x, int64_t n);

// x *= scale.
void scale(float* x, int64_t n, float scale);

// x = value (also over NaN, which scale(x, 0) would keep).
void fill(float* x, int64_t n, float value);

}  // namespace tfm::cpu
