// Element-wise CUDA kernels on contiguous f32 device arrays (elementwise_cpu.h on the GPU): the
// same arguments and semantics, device pointers, queued on cuda::stream().
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"

namespace tfm::internal::cuda {

// dst = scale * src when !accumulate, dst += scale * src afterwards.
void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale = 1.0f);

// dst[j] (+)= sum over r of src[r, j] for src [rows, cols] (a bias's gradient). The columns are
// summed in two stages, per chunk of rows into `workspace` (device memory of
// sum_rows_workspace(rows, cols) floats that the caller allocates; null when that is 0), then over
// the chunks, in a fixed order: the result is the same from run to run.
int64_t sum_rows_workspace(int64_t rows, int64_t cols);
void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate,
              float* workspace);

void add(const float* a, const float* b, float* out, int64_t n);

void relu(const float* x, float* y, int64_t n);
// dx (+)= g where y > 0 (y is relu's output).
void relu_backward(const float* y, const float* g, float* dx, int64_t n, bool accumulate);
// dx = g where y > 0, and dx_bf16 = dx rounded to bf16 (as f32_to_bf16), in one pass.
void relu_backward_bf16(const float* y, const float* g, float* dx, bf16* dx_bf16, int64_t n);
// y = x Phi(x) (erf form); dx (+)= g (Phi(x) + x phi(x)).
void gelu(const float* x, float* y, int64_t n);
void gelu_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate);
// y = x sigmoid(x); dx (+)= g s (1 + x (1 - s)).
void swish(const float* x, float* y, int64_t n);
void swish_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate);

}  // namespace tfm::internal::cuda
