// Optimizer kernels on f32 device arrays (optimizer_cpu.h on the GPU: the same arguments and
// semantics, device pointers, queued on cuda::stream()).
#pragma once

#include <cstdint>

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

// The Adam step's scalars: the CPU kernel's struct.
using AdamStep = kernels::AdamStep;

//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= step_size m / (sqrt(v) inv_sqrt_bc2 +
//   eps)
void adam_step(float* p, float* m, float* v, const float* g, int64_t n, const AdamStep& step);

// sum_i x_i^2 accumulated in double, read back to the host: waits for the GPU.
double sum_squares(const float* x, int64_t n);
// The same sum left on the device: *device_out = sum (accumulate: += sum), without waiting, so
// that several tensors' sums need one read-back. The blocks' partial sums are added in a fixed
// order: the result is the same from run to run.
void sum_squares_async(const float* x, int64_t n, double* device_out, bool accumulate);

// x *= scale.
void scale(float* x, int64_t n, float scale);

// x = value (also over NaN, which scale(x, 0) would keep).
void fill(float* x, int64_t n, float value);

// average = decay * average + (1 - decay) * x.
void moving_average(float* average, const float* x, int64_t n, float decay);

}  // namespace tfm::internal::cuda
