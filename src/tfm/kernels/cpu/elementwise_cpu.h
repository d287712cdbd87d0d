// Element-wise CPU kernels on contiguous f32 arrays, and the gradient write every backward shares.
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// dst = scale * src when !accumulate (the first gradient written this pass), dst += scale * src
// afterwards: a tensor used by several ops sums the gradients from each of them.
void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale = 1.0f);

// dst[j] (+)= sum over r of src[r, j] for src [rows, cols] (a bias's gradient).
void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate);

void add(const float* a, const float* b, float* out, int64_t n);

void relu(const float* x, float* y, int64_t n);
// dx (+)= g where y > 0 (y is relu's output).
void relu_backward(const float* y, const float* g, float* dx, int64_t n, bool accumulate);
// dx = g where y > 0, and dx_bf16 = dx rounded to bf16 (f32_to_bf16_bits), in one pass.
void relu_backward_bf16(const float* y, const float* g, float* dx, bf16* dx_bf16, int64_t n);
// For y, g and dx_bf16 [rows, cols]: dx_bf16 = (g where y > 0) rounded to bf16, and, where db is
// not null, db [cols] (+)= the column sums of (g where y > 0), each column summed over the rows in
// order as sum_rows does (the same bits). No f32 dx is written.
void relu_backward_bias_bf16(const float* y, const float* g, int64_t rows, int64_t cols,
                             bf16* dx_bf16, float* db, bool accumulate);
// The same with relu's output kept in bf16 (y_bf16 > 0 where y > 0, but for the y below 2^-133
// that round to 0): the same bits as relu_backward_bias_bf16 on y_bf16 widened to f32.
void relu_backward_bias_from_bf16(const bf16* y_bf16, const float* g, int64_t rows, int64_t cols,
                                  bf16* dx_bf16, float* db, bool accumulate);
// y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2; dx (+)= g (Phi(x) + x phi(x)).
void gelu(const float* x, float* y, int64_t n);
void gelu_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate);
// y = x sigmoid(x); dx (+)= g s (1 + x (1 - s)) with s = sigmoid(x).
void swish(const float* x, float* y, int64_t n);
void swish_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
