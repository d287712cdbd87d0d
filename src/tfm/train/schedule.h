// The learning-rate schedule of section 5.3, equation 3:
//   lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
// rising linearly for `warmup` steps, then decaying with the inverse square root of the step.
// For a run of a known length (optimizer.schedule linear or cosine) the same warmup to the same
// peak is followed instead by a decay to zero at update `decay_end`, which spends the whole
// budget's updates at a useful rate: equation 3 is made for 100k updates and still stands near its
// peak when a budget of minutes ends.
#pragma once

#include <cstdint>
#include <string>

namespace tfm::internal {

// The shape after the warmup: equation 3's inverse square root, or a decay to zero.
enum class ScheduleShape { noam, linear, cosine };

// "noam", "linear", "cosine" -> the shape; an error naming `key` and the names otherwise.
ScheduleShape parse_schedule_shape(const std::string& name, const std::string& key);
const char* schedule_shape_name(ScheduleShape shape);

struct NoamSchedule {
  int64_t d_model = 512;
  int64_t warmup = 4000;
  double scale = 1.0;
  ScheduleShape shape = ScheduleShape::noam;
  // linear, cosine: the update at which the rate reaches zero (after the warmup); 0: not known yet
  // (a time budget before its speed is measured), when the rate follows equation 3.
  int64_t decay_end = 0;

  // step is 1-based (the first update is step 1). With a decay, p = (step - warmup) /
  // (decay_end - warmup) in [0, 1] after the warmup gives peak * (1 - p) (linear) or
  // peak * (1 + cos(pi p)) / 2 (cosine); past decay_end the rate is 0.
  double learning_rate(int64_t step) const;

  // The highest rate, reached at step `warmup`: scale * d_model^-0.5 * warmup^-0.5.
  double peak() const;

  // This schedule with a shorter warmup and the same peak: the scale becomes
  // scale * sqrt(warmup / this->warmup), so the rate rises to the same height in fewer updates and
  // then decays as peak * sqrt(warmup / step). Equation 3 alone would raise the peak by
  // sqrt(this->warmup / warmup), which a short run does not survive (a warmup of 150 instead of
  // 1000 makes Multi30k's small model diverge).
  NoamSchedule with_warmup_at_same_peak(int64_t shorter_warmup) const;

  // This schedule decaying to zero at `end` (linear, cosine; kept for noam, which ignores it).
  // An end within the warmup moves to warmup + 1: the decay always follows the peak.
  NoamSchedule with_decay_end(int64_t end) const;
};

}  // namespace tfm::internal
