// The learning-rate schedule of section 5.3, equation 3:
//   lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
// rising linearly for `warmup` steps, then decaying with the inverse square root of the step.
#pragma once

#include <cstdint>

namespace tfm {

struct NoamSchedule {
  int64_t d_model = 512;
  int64_t warmup = 4000;
  double scale = 1.0;

  // step is 1-based (the first update is step 1).
  double learning_rate(int64_t step) const;
};

}  // namespace tfm
