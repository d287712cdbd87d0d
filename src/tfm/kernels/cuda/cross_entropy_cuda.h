// Label-smoothed cross-entropy on CUDA: the kernels of kernels/cpu/cross_entropy_cpu.h with device
// pointers, one block per row. The sums the CPU returns as a host struct stay on the device here
// (the op copies them back where its API returns host numbers).
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"

namespace tfm::internal::cuda {

// What cross_entropy leaves in `sums` (device doubles): the CPU's CrossEntropySums, and the number
// of targets that are neither ignore_index nor in [0, vocab) (their rows count nothing; the op
// reports them as an error once the sums are on the host).
enum CrossEntropySum : int {
  kLossSum = 0,
  kNllSum = 1,
  kTokens = 2,
  kBadTargets = 3,
  kSumCount = 4
};

// cpu::cross_entropy: lse and row_loss_nll ([rows, 2] scratch) as in cross_entropy_rows, then
// sums[kSumCount] reduced on the device in a fixed order (deterministic).
void cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                   float label_smoothing, int32_t ignore_index, float* lse, float* row_loss_nll,
                   double* sums);

// cpu::cross_entropy_rows (a target outside the vocabulary counts as ignored).
void cross_entropy_rows(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                        float label_smoothing, int32_t ignore_index, float* row_loss_nll,
                        float* lse = nullptr);

// cpu::cross_entropy_rows_with_grad, except that when dlogits_bf16 is given only the bf16 copy is
// written (the logits are left as they are): the f32 gradient is not needed then.
void cross_entropy_rows_with_grad(float* logits, const int32_t* targets, int64_t rows,
                                  int64_t vocab, float label_smoothing, int32_t ignore_index,
                                  float scale, float* row_loss_nll, bf16* dlogits_bf16 = nullptr);

// cpu::cross_entropy_backward; when scale_by is given (a device scalar: the upstream gradient of
// the loss), the scale is scale * *scale_by, read on the device.
void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate,
                            const float* scale_by = nullptr);

}  // namespace tfm::internal::cuda
