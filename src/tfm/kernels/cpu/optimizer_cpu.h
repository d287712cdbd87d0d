// Optimizer kernels: the Adam update and the pieces of gradient clipping by global norm.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

using kernels::AdamStep;  // kernels/kernel_args.h

//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p = keep p - step_size m / (sqrt(v) inv_sqrt_bc2 + eps)
void adam_step(float* p, float* m, float* v, const float* g, int64_t n, const AdamStep& step);

// sum_i x_i^2, accumulated in double.
double sum_squares(const float* x, int64_t n);

// x *= scale.
void scale(float* x, int64_t n, float scale);

// x = value (also over NaN, which scale(x, 0) would keep).
void fill(float* x, int64_t n, float value);

// average = decay * average + (1 - decay) * x.
void moving_average(float* average, const float* x, int64_t n, float decay);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
