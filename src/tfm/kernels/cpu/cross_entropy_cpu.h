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

// R-Drop's loss on two passes' logits of the same targets (rows r of a and b): each row's
// cross_entropy_rows terms in stats_a and stats_b, and consistency[r] = (KL(p || q) + KL(q || p)) /
// 2 with p = softmax(a_r), q = softmax(b_r) (0 on ignored rows). The logits are overwritten with
// the gradient of scale * (loss_a + loss_b + weight * consistency) (0 on ignored rows) and, when
// dlogits_*_bf16 are given, copied there rounded to bf16.
void paired_cross_entropy_rows_with_grad(float* logits_a, float* logits_b, const int32_t* targets,
                                         int64_t rows, int64_t vocab, float label_smoothing,
                                         int32_t ignore_index, float scale, float weight,
                                         float* stats_a, float* stats_b, float* consistency,
                                         bf16* dlogits_a_bf16, bf16* dlogits_b_bf16);

// dlogits (+)= scale * (softmax(z) - q) on counted rows, 0 on ignored ones; scale is d(loss)
// divided by the normalizer.
void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
