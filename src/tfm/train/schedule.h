// The learning-rate schedule of section 5.3, equation 3:
//   lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
// rising linearly for `warmup` steps, then decaying with the inverse square root of the step.
#pragma once

#include <cstdint>

namespace tfm::internal {

struct NoamSchedule {
  int64_t d_model = 512;
  int64_t warmup = 4000;
  double scale = 1.0;

  // step is 1-based (the first update is step 1).
  double learning_rate(int64_t step) const;

  // The highest rate, reached at step `warmup`: scale * d_model^-0.5 * warmup^-0.5.
  double peak() const;

  // This schedule with a shorter warmup and the same peak: the scale becomes
  // scale * sqrt(warmup / this->warmup), so the rate rises to the same height in fewer updates and
  // then decays as peak * sqrt(warmup / step). Equation 3 alone would raise the peak by
  // sqrt(this->warmup / warmup), which a short run does not survive (a warmup of 150 instead of
  // 1000 makes Multi30k's small model diverge).
  NoamSchedule with_warmup_at_same_peak(int64_t shorter_warmup) const;
};

}  // namespace tfm::internal
