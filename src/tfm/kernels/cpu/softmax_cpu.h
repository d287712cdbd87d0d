// Softmax over the last dimension of a [rows, n] f32 array.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// One row, on the calling thread (for fused kernels such as attention). Subtracts the row's
// maximum first, so large inputs do not overflow; -inf entries get exactly 0 (a row of only -inf
// gives NaN, as in PyTorch). y may equal x.
void softmax_row(const float* x, float* y, int64_t n);
// dx (+)= y * (g - sum_j g_j y_j) for one row.
void softmax_backward_row(const float* y, const float* g, float* dx, int64_t n, bool accumulate);

void softmax(const float* x, float* y, int64_t rows, int64_t n);
void softmax_backward(const float* y, const float* g, float* dx, int64_t rows, int64_t n,
                      bool accumulate);

// y = x - log(sum_j exp(x_j)) per row (log-softmax); y may equal x.
void log_softmax(const float* x, float* y, int64_t rows, int64_t n);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
