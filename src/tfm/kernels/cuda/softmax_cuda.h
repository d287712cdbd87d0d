// Softmax over the last dimension of a [rows, n] f32 device array (softmax_cpu.h on the GPU: the
// same arguments and semantics, device pointers, queued on cuda::stream()). Rows of any length.
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

// y = exp(x - max) / sum exp(x - max) per row; -inf entries get 0, a row of only -inf gives NaN.
// y may equal x.
void softmax(const float* x, float* y, int64_t rows, int64_t n);
// dx (+)= y * (g - sum_j g_j y_j) per row.
void softmax_backward(const float* y, const float* g, float* dx, int64_t rows, int64_t n,
                      bool accumulate);

// y = x - max - log(sum_j exp(x_j - max)) per row; y may equal x.
void log_softmax(const float* x, float* y, int64_t rows, int64_t n);

}  // namespace tfm::internal::cuda
