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
  // linear, cosine: where the decay's progress was last anchored when its end moved during the
  // decay (with_decay_end_from): progress decay_from_progress at update decay_from. 0: the
  // warmup's end, progress 0.
  int64_t decay_from = 0;
  double decay_from_progress = 0.0;

  // step is 1-based (the first update is step 1). With a decay, the progress after the warmup
  //   p = p0 + (1 - p0) (step - from) / (decay_end - from)   in [0, 1]
  // (from = warmup and p0 = 0 unless re-anchored; before `from`, the line from 0 at the warmup's
  // end to p0) gives peak * (1 - p) (linear) or
  // peak * (1 + cos(pi p)) / 2 (cosine); past decay_end the rate is 0.
  double learning_rate(int64_t step) const;
  // The decay's progress p at `step` (0 up to the warmup's end or while the end is unknown).
  double decay_progress(int64_t step) const;

  // The highest rate, reached at step `warmup`: scale * d_model^-0.5 * warmup^-0.5.
  double peak() const;

  // This schedule with a shorter warmup and the same peak: the scale becomes
  // scale * sqrt(warmup / this->warmup), so the rate rises to the same height in fewer updates and
  // then decays as peak * sqrt(warmup / step). Equation 3 alone would raise the peak by
  // sqrt(this->warmup / warmup), which a short run does not survive (a warmup of 150 instead of
  // 1000 makes Multi30k's small model diverge).
  NoamSchedule with_warmup_at_same_peak(int64_t shorter_warmup) const;

  // This schedule decaying to zero at `end` (linear, cosine; kept for noam, which ignores it) from
  // the warmup's end (any anchor is dropped). An end within the warmup moves to warmup + 1: the
  // decay always follows the peak.
  NoamSchedule with_decay_end(int64_t end) const;

  // This schedule reaching zero at `end` instead, from update `step` on: the progress is
  // re-anchored at `step` (the rate there is unchanged) and runs linearly to 1 at `end`, so a
  // time budget's end can be estimated again during the decay without the rate jumping. Within the
  // warmup it is with_decay_end. An end not after `step` moves to step + 1.
  NoamSchedule with_decay_end_from(int64_t step, int64_t end) const;
};

}  // namespace tfm::internal
