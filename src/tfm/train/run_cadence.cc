#include "tfm/train/run_cadence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tfm/core/error.h"

namespace tfm::internal {

int64_t fitted_warmup(const TrainRecipe& recipe, double expected_updates) {
  const auto fitted = static_cast<int64_t>(std::llround(recipe.warmup_fraction * expected_updates));
  return std::clamp<int64_t>(fitted, 1, recipe.warmup);
}

bool schedule_fits_budget(const TrainRecipe& recipe) {
  return recipe.warmup_fraction > 0 || recipe.schedule != "noam" || recipe.dropout_auto();
}

double dropout_for_epochs(double epochs) {
  if (epochs < 4.3) return 0.0;   // sqrt(2.4 * 7.6)
  if (epochs < 13.5) return 0.1;  // sqrt(7.6 * 24)
  return 0.3;
}

int64_t decay_end(double expected_updates) {
  return std::max<int64_t>(1, std::llround(expected_updates));
}

int64_t update_budget(const TrainRecipe& recipe, double updates_per_epoch) {
  int64_t budget = recipe.max_steps;
  if (recipe.max_epochs > 0) {
    const auto by_epochs = std::max<int64_t>(
        1, static_cast<int64_t>(
               std::ceil(static_cast<double>(recipe.max_epochs) * updates_per_epoch - 1e-9)));
    budget = budget > 0 ? std::min(budget, by_epochs) : by_epochs;
  }
  return budget;
}

std::string describe_budget_length(const TrainRecipe& recipe, int64_t update_budget, int64_t step,
                                   double expected_updates) {
  const char* limit =
      recipe.max_epochs > 0 && (recipe.max_steps <= 0 || update_budget < recipe.max_steps)
          ? "training.max_epochs"
          : "training.max_steps";
  if (recipe.max_minutes <= 0) return limit;
  if (update_budget > 0 && expected_updates >= static_cast<double>(update_budget))
    return fmt::format("{}, fewer than training.max_minutes {:g} allows", limit,
                       recipe.max_minutes);
  return fmt::format("the updates training.max_minutes {:g} allows, estimated after update {}",
                     recipe.max_minutes, step);
}

WarmupFit::WarmupFit(const TrainRecipe& recipe, bool fitted)
    : fits_budget_(schedule_fits_budget(recipe)),
      warmup_(recipe.warmup),
      update_budget_(recipe.max_steps),
      max_minutes_(recipe.max_minutes),
      fitted_(fitted),
      decays_(recipe.schedule != "noam") {}

std::optional<double> WarmupFit::at_start(const std::function<void(const std::string&)>& note) {
  if (!fits_budget_ || fitted_ || max_minutes_ > 0) return std::nullopt;
  if (update_budget_ > 0) return static_cast<double>(update_budget_);
  note(fmt::format(
      "optimizer.warmup_fraction needs a budget (training.max_steps, max_epochs or max_minutes): "
      "warmup {}",
      warmup_));
  fitted_ = true;
  return std::nullopt;
}

std::optional<double> WarmupFit::after_update(int64_t step,
                                              const std::function<double()>& elapsed) {
  if (probe_start_step_ < 0) {
    probe_start_step_ = step;
    probe_start_seconds_ = elapsed();
    return std::nullopt;
  }
  if (fitted_ || step - probe_start_step_ < kWarmupProbeUpdates) return std::nullopt;
  const double now = elapsed();
  probe_seconds_per_update_ = seconds_per_update(step, now);
  return expected_updates(step, now);
}

double WarmupFit::seconds_per_update(int64_t step, double now) const {
  return (now - probe_start_seconds_) / static_cast<double>(step - probe_start_step_);
}

// The updates done plus those the time left allows at the speed of the updates timed so far.
std::optional<double> WarmupFit::expected_updates(int64_t step, double now) const {
  if (probe_start_step_ < 0 || step <= probe_start_step_) return std::nullopt;
  const double per_update = seconds_per_update(step, now);
  double expected = static_cast<double>(step) +
                    std::max(0.0, max_minutes_ * 60 - now) / std::max(per_update, 1e-9);
  if (update_budget_ > 0) expected = std::min(expected, static_cast<double>(update_budget_));
  return expected;
}

void WarmupFit::plan_decay_refit(int64_t warmup_end, int64_t step) {
  const bool due = decays_ && max_minutes_ > 0 && warmup_end > step;
  decay_refit_at_ = due ? warmup_end : -1;
}

std::optional<double> WarmupFit::decay_refit(int64_t step, const std::function<double()>& elapsed) {
  if (decay_refit_at_ < 0 || step != decay_refit_at_) return std::nullopt;
  decay_refit_at_ = -1;
  return expected_updates(step, elapsed());
}

std::optional<double> WarmupFit::decay_estimate(int64_t step, int64_t warmup_end,
                                                const std::function<double()>& elapsed) const {
  if (!decays_ || max_minutes_ <= 0 || !fitted_ || step <= warmup_end) return std::nullopt;
  return expected_updates(step, elapsed());
}

CheckpointInterval checkpoint_interval(const TrainRecipe& recipe, int64_t update_budget) {
  CheckpointInterval interval{recipe.checkpoint_every_steps, recipe.checkpoint_every_minutes};
  const double fraction = recipe.checkpoint_every_fraction;
  if (fraction <= 0) return interval;
  if (recipe.max_minutes > 0) {
    const double minutes = fraction * recipe.max_minutes;
    interval.minutes = interval.minutes > 0 ? std::min(interval.minutes, minutes) : minutes;
  }
  if (update_budget > 0) {
    const int64_t steps =
        std::max<int64_t>(1, std::llround(fraction * static_cast<double>(update_budget)));
    interval.steps = interval.steps > 0 ? std::min(interval.steps, steps) : steps;
  }
  return interval;
}

std::string describe_checkpoint_interval(const CheckpointInterval& interval, int64_t keep) {
  return fmt::format("checkpoints every {}{}{}, keeping the last {}",
                     interval.minutes > 0 ? fmt::format("{:.2f} minutes", interval.minutes) : "",
                     interval.minutes > 0 && interval.steps > 0 ? " or " : "",
                     interval.steps > 0 ? fmt::format("{} updates", interval.steps) : "", keep);
}

CheckpointCadence::CheckpointCadence(const CheckpointInterval& interval, int64_t step,
                                     double elapsed)
    : interval_(interval), last_step_(step), last_seconds_(elapsed) {}

bool CheckpointCadence::due(int64_t step, double elapsed) const {
  const bool by_steps = interval_.steps > 0 && step - last_step_ >= interval_.steps;
  const bool by_time = interval_.minutes > 0 && elapsed - last_seconds_ >= interval_.minutes * 60;
  return by_steps || by_time;
}

void CheckpointCadence::saved(int64_t step, double elapsed) {
  last_seconds_ = elapsed;
  last_step_ = step;
}

bool limits_reached(const TrainRecipe& recipe, int64_t step, int64_t completed_epochs,
                    double elapsed) {
  if (recipe.max_steps > 0 && step >= recipe.max_steps) return true;
  if (recipe.max_epochs > 0 && completed_epochs >= recipe.max_epochs) return true;
  if (recipe.max_minutes > 0 && elapsed >= recipe.max_minutes * 60) return true;
  return false;
}

bool validation_due(const TrainRecipe& recipe, int64_t step, bool epoch_ended) {
  return (recipe.validate_every_steps > 0 && step % recipe.validate_every_steps == 0) ||
         (recipe.validate_every_steps == 0 && epoch_ended);
}

void NonFiniteUpdates::check(int64_t step, double lr_scale,
                             const std::string& last_checkpoint) const {
  TFM_CHECK(in_a_row_ < kMaxNonFiniteUpdatesInARow,
            "step {}: the loss or gradient norm was not finite in {} updates in a row (is "
            "optimizer.lr_scale {} too high?); stopped without saving; the last checkpoint is {}",
            step, in_a_row_, lr_scale, last_checkpoint.empty() ? "none" : last_checkpoint);
}

}  // namespace tfm::internal
