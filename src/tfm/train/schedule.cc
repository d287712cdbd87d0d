#include "tfm/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tfm/core/error.h"

namespace tfm::internal {

ScheduleShape parse_schedule_shape(const std::string& name, const std::string& key) {
  if (name == "noam") return ScheduleShape::noam;
  if (name == "linear") return ScheduleShape::linear;
  if (name == "cosine") return ScheduleShape::cosine;
  fail("{} must be noam, linear or cosine, got '{}'", key, name);
}

const char* schedule_shape_name(ScheduleShape shape) {
  switch (shape) {
    case ScheduleShape::linear:
      return "linear";
    case ScheduleShape::cosine:
      return "cosine";
    case ScheduleShape::noam:
      break;
  }
  return "noam";
}

namespace {

// Equation 3.
double equation_three(const NoamSchedule& schedule, int64_t step) {
  TFM_CHECK(step >= 1, "learning-rate step must be >= 1, got {}", step);
  TFM_CHECK(schedule.warmup >= 1, "warmup must be >= 1, got {}", schedule.warmup);
  double s = static_cast<double>(step);
  return schedule.scale * std::pow(static_cast<double>(schedule.d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(schedule.warmup), -1.5));
}

}  // namespace

double NoamSchedule::decay_progress(int64_t step) const {
  if (shape == ScheduleShape::noam || decay_end == 0 || step <= warmup) return 0.0;
  if (step >= decay_end) return 1.0;
  const bool anchored = decay_from > warmup;
  const int64_t from = anchored ? decay_from : warmup;
  const double p0 = anchored ? decay_from_progress : 0.0;
  // Before the anchor (not asked in a run): the straight line from the warmup's end to it, which is
  // the line it was moved from when it moved once.
  if (step <= from)
    return p0 * static_cast<double>(step - warmup) / static_cast<double>(from - warmup);
  return p0 + (1.0 - p0) * static_cast<double>(step - from) / static_cast<double>(decay_end - from);
}

double NoamSchedule::learning_rate(int64_t step) const {
  const double noam = equation_three(*this, step);
  if (shape == ScheduleShape::noam || decay_end == 0 || step <= warmup) return noam;
  if (step >= decay_end) return 0.0;
  const double p = decay_progress(step);  // in (0, 1)
  const double top = peak();
  if (shape == ScheduleShape::linear) return top * (1.0 - p);
  return top * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
}

double NoamSchedule::peak() const {
  return equation_three(*this, warmup);
}

NoamSchedule NoamSchedule::with_warmup_at_same_peak(int64_t shorter_warmup) const {
  TFM_CHECK(shorter_warmup >= 1, "warmup must be >= 1, got {}", shorter_warmup);
  NoamSchedule fitted = *this;
  fitted.warmup = shorter_warmup;
  fitted.scale =
      scale * std::sqrt(static_cast<double>(shorter_warmup) / static_cast<double>(warmup));
  return fitted;
}

NoamSchedule NoamSchedule::with_decay_end(int64_t end) const {
  TFM_CHECK(end >= 1, "the decay's end must be >= 1, got {}", end);
  NoamSchedule decaying = *this;
  decaying.decay_end = std::max(end, warmup + 1);
  decaying.decay_from = 0;
  decaying.decay_from_progress = 0.0;
  return decaying;
}

NoamSchedule NoamSchedule::with_decay_end_from(int64_t step, int64_t end) const {
  if (step <= warmup || decay_end == 0) return with_decay_end(end);
  NoamSchedule moved = *this;
  moved.decay_from = step;
  moved.decay_from_progress = decay_progress(step);
  moved.decay_end = std::max(end, step + 1);
  return moved;
}

}  // namespace tfm::internal
