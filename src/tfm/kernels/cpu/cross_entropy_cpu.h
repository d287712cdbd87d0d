// Label-smoothed cross-entropy over [rows, vocab] f32 logits with i32 targets.
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

using kernels::CrossEntropySums;  // kernels/kernel_args.h

// Every target is ignore_index or in [0, vocab). Writes each row's log-sum-exp (lse) for the
// backward; rows with target ignore_index get none.
CrossEntropySums cross_entropy(const float* logits, const int32_t* targets, int64_t rows,
                               int64_t vocab, float label_smoothing, int32_t ignore_index,
                               float* lse);

// The per-row terms of cross_entropy: row_loss_nll[2r] = loss_r, row_loss_nll[2r + 1] = nll_r (both
// 0 on ignored rows). Summing them in row order gives cross_entropy's sums.
// When lse is given it receives each counted row's log-sum-exp (ignored rows are left as they are).
void cross_entropy_rows(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                        float label_smoothing, int32_t ignore_index, float* row_loss_nll,
                        float* lse = nullptr);

// cross_entropy_rows, and in the same visit of each row (while it is in cache) the row's logits
// are overwritten with its gradient scale * (softmax(z) - q) (0 on ignored rows): the values
// cross_entropy_backward writes. When dlogits_bf16 is given, it also receives them rounded to bf16
// (as f32_to_bf16).
void cross_entropy_rows_with_grad(float* logits, const int32_t* targets, int64_t rows,
                                  int64_t vocab, float label_smoothing, int32_t ignore_index,
                                  float scale, float* row_loss_nll, bf16* dlogits_bf16 = nullptr);

// dlogits (+)= scale * (softmax(z) - q) on counted rows, 0 on ignored ones; scale is d(loss)
// divided by the normalizer.
void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
