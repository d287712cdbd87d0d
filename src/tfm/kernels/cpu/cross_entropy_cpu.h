// Label-smoothed cross-entropy over [rows, vocab] f32 logits with i32 targets.
#pragma once

#include <cstdint>

namespace tfm::cpu {

struct CrossEntropySums {
  double loss = 0;     // sum over counted rows of -sum_j q_j log p_j
  double nll = 0;      // sum over counted rows of -log p_target
  int64_t tokens = 0;  // rows whose target is not ignore_index
};

// Every target is ignore_index or in [0, vocab). Writes each row's log-sum-exp (lse) for the
// backward; rows with target ignore_index get none.
CrossEntropySums cross_entropy(const float* logits, const int32_t* targets, int64_t rows,
                               int64_t vocab, float label_smoothing, int32_t ignore_index,
                               float* lse);

// dlogits (+)= scale * (softmax(z) - q) on counted rows, 0 on ignored ones; scale is d(loss)
// divided by the normalizer.
void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate);

}  // namespace tfm::cpu
