// When a training run does what (train/training_run.h): its limits, the cadence of its checkpoints
// and validations, and the schedules fitted to its budget (optimizer.warmup_fraction,
// optimizer.schedule's decay, checkpoints.every_fraction), so that a short run is a small copy of a
// long one rather than its first minutes: the warmup ends, the learning rate reaches zero and the
// averaged checkpoints start at the same share of the run whatever its budget. Numbers in,
// decisions out; the run reads its clock and passes the time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tfm/train/recipe.h"

namespace tfm::internal {

// Updates timed to estimate the speed of a run with a time budget, after its first update (which
// also pays for start-up). Until then the recipe's warmup applies: its ramp starts lower than the
// fitted one, which changes the first few updates' learning rate by a negligible amount.
constexpr int64_t kWarmupProbeUpdates = 20;

// optimizer.warmup_fraction of `expected_updates`, at least 1 and at most optimizer.warmup.
int64_t fitted_warmup(const TrainRecipe& recipe, double expected_updates);

// Whether the schedule is fitted to the run's updates: optimizer.warmup_fraction is on,
// optimizer.schedule decays to zero at the run's end, or model.dropout is auto (chosen at the same
// moment, from the same estimate).
bool schedule_fits_budget(const TrainRecipe& recipe);

// model.dropout auto: the dropout for a run of about `epochs` passes over the training data. The
// more epochs, the more a model overfits without it: on Multi30k's recipe (docs/RESULTS.md) 0 was
// best at 2.4 epochs, 0.1 at 7.6 and 0.3 at 24; each step of this table is the geometric middle
// between two measured runs.
double dropout_for_epochs(double epochs);

// The update at which a decaying schedule reaches zero: `expected_updates` rounded, at least 1.
int64_t decay_end(double expected_updates);

// The run's length in updates where it is fixed before the first: training.max_steps, or
// training.max_epochs at `updates_per_epoch` updates an epoch (rounded up), the less of the two
// where both are set; 0 where neither is.
int64_t update_budget(const TrainRecipe& recipe, double updates_per_epoch);

// Where the run's length in updates came from, for the log: "training.max_steps" or
// "training.max_epochs" (whichever gave `update_budget`), or the time budget's estimate made after
// update `step`.
std::string describe_budget_length(const TrainRecipe& recipe, int64_t update_budget, int64_t step,
                                   double expected_updates);

// When the schedule is fitted to the budget (fitted_warmup, decay_end): at the start for a budget
// of updates, after timing kWarmupProbeUpdates updates for a time budget. Either returns the
// updates to fit to; the run then sets its schedule and calls set_fitted.
class WarmupFit {
 public:
  // `fitted`: nothing to wait for (schedule_fits_budget false, or a resumed run's schedule).
  WarmupFit(const TrainRecipe& recipe, bool fitted);

  bool fitted() const { return fitted_; }
  void set_fitted(bool fitted) { fitted_ = fitted; }
  // The budget in updates (update_budget) once the epoch's length is known; until then
  // training.max_steps.
  void set_update_budget(int64_t updates) { update_budget_ = updates; }

  // Before the first update: the budget in updates when it is the only budget. Without any budget
  // the recipe's warmup stays (said through `note`) and nothing is left to fit.
  std::optional<double> at_start(const std::function<void(const std::string&)>& note);
  // After each update (`step` done, `elapsed` the run's clock in seconds): the updates the time
  // budget allows at the speed of the updates after this process's first one, once
  // kWarmupProbeUpdates of them are timed (at most the budget in updates).
  std::optional<double> after_update(int64_t step, const std::function<double()>& elapsed);
  // The seconds an update that after_update's estimate assumed, and the updates it timed (from
  // probe_first_step() to the step of the estimate); 0 until it estimated.
  double probe_seconds_per_update() const { return probe_seconds_per_update_; }
  int64_t probe_first_step() const { return probe_start_step_ + 1; }

  // A decaying schedule under a time budget is fitted twice: the first estimate (after_update)
  // sets the warmup and a provisional end; at the warmup's end, where the rate is the peak for any
  // end, the end is estimated again from the speed of every update this process has timed, its
  // validations and checkpoints included, which the first updates alone overstate. Called with
  // the fitted warmup and the step at the fit (or at a resume): the re-estimate is due at the
  // warmup's end when that is still ahead (a warmup already over leaves the end to
  // decay_estimate, which moves it without a jump).
  void plan_decay_refit(int64_t warmup_end, int64_t step);
  // After each update: the updates the budget allows, once, at the planned update (at most the
  // budget in updates); nullopt otherwise.
  std::optional<double> decay_refit(int64_t step, const std::function<double()>& elapsed);
  // During a time budget's decay (after `warmup_end`), whenever the run asks (at each
  // checkpoint): the updates the budget allows at the speed of every update this process has
  // timed, validations and checkpoints included. The run moves the decay's end there from `step`
  // on (NoamSchedule::with_decay_end_from), so the rate reaches zero as the budget ends rather
  // than at an end estimated in the run's first quarter. nullopt: no time budget, no decay, not
  // fitted yet, or the warmup not over.
  std::optional<double> decay_estimate(int64_t step, int64_t warmup_end,
                                       const std::function<double()>& elapsed) const;

 private:
  std::optional<double> expected_updates(int64_t step, double now) const;
  // The mean seconds of the updates timed from the probe's start to `step` at `now`.
  double seconds_per_update(int64_t step, double now) const;

  bool fits_budget_;
  int64_t warmup_;
  int64_t update_budget_;  // the budget in updates; 0: none
  double max_minutes_;
  bool fitted_;
  int64_t probe_start_step_ = -1;  // the speed of the updates after this process's first one
  double probe_start_seconds_ = 0;
  double probe_seconds_per_update_ = 0;
  bool decays_;                  // optimizer.schedule is not noam
  int64_t decay_refit_at_ = -1;  // the update after which decay_refit estimates again; -1: none
};

struct CheckpointInterval {
  int64_t steps = 0;     // 0: not by steps
  double minutes = 0.0;  // 0: not by time
};

// The recipe's intervals, shortened to checkpoints.every_fraction of its budgets
// (training.max_minutes and `update_budget`).
CheckpointInterval checkpoint_interval(const TrainRecipe& recipe, int64_t update_budget);
// "checkpoints every 0.50 minutes or 5 updates, keeping the last 10" (said when fitted).
std::string describe_checkpoint_interval(const CheckpointInterval& interval, int64_t keep);

// Whether a checkpoint is due: `interval` after the last one, in updates or in minutes.
class CheckpointCadence {
 public:
  // The run starts as if it had saved at `step` and `elapsed` seconds.
  CheckpointCadence(const CheckpointInterval& interval, int64_t step, double elapsed);
  bool due(int64_t step, double elapsed) const;
  void saved(int64_t step, double elapsed);
  int64_t last_step() const { return last_step_; }

 private:
  CheckpointInterval interval_;
  int64_t last_step_;
  double last_seconds_;
};

// training.max_steps, max_epochs or max_minutes reached.
bool limits_reached(const TrainRecipe& recipe, int64_t step, int64_t completed_epochs,
                    double elapsed);
// validation.every_steps, or (0) the end of an epoch.
bool validation_due(const TrainRecipe& recipe, int64_t step, bool epoch_ended);

// Updates in a row with a non-finite loss or gradient norm after which a run stops: one is an odd
// batch, several mean the weights or the learning rate are broken.
constexpr int64_t kMaxNonFiniteUpdatesInARow = 5;

class NonFiniteUpdates {
 public:
  // One more skipped update; returns how many in a row.
  int64_t skipped() { return ++in_a_row_; }
  void finite() { in_a_row_ = 0; }
  // The error that stops the run once kMaxNonFiniteUpdatesInARow were skipped in a row (`step`:
  // the update skipped last).
  void check(int64_t step, double lr_scale, const std::string& last_checkpoint) const;

 private:
  int64_t in_a_row_ = 0;
};

}  // namespace tfm::internal
