#include "tfm/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"

namespace tfm {

double NoamSchedule::learning_rate(int64_t step) const {
  TFM_CHECK(step >= 1, "learning-rate step must be >= 1, got {}", step);
  TFM_CHECK(warmup >= 1, "warmup must be >= 1, got {}", warmup);
  double s = static_cast<double>(step);
  return scale * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5));
}

}  // namespace tfm
