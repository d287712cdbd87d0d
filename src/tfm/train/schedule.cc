#include "tfm/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"

namespace tfm::internal {

double NoamSchedule::learning_rate(int64_t step) const {
  TFM_CHECK(step >= 1, "learning-rate step must be >= 1, got {}", step);
  TFM_CHECK(warmup >= 1, "warmup must be >= 1, got {}", warmup);
  double s = static_cast<double>(step);
  return scale * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup), -1.5));
}

double NoamSchedule::peak() const {
  return learning_rate(warmup);
}

NoamSchedule NoamSchedule::with_warmup_at_same_peak(int64_t shorter_warmup) const {
  TFM_CHECK(shorter_warmup >= 1, "warmup must be >= 1, got {}", shorter_warmup);
  return {d_model, shorter_warmup,
          scale * std::sqrt(static_cast<double>(shorter_warmup) / static_cast<double>(warmup))};
}

}  // namespace tfm::internal
