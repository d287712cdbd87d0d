// The decisions of a training run (train/run_cadence.h, run_progress.h), each alone: its limits,
// when it validates and saves, the warmup fitted to its budget, when non-finite updates stop it,
// and its progress lines.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tfm/train/run_cadence.h"
#include "tfm/train/run_progress.h"

namespace tfm::internal {
namespace {

using testing::expect_error;

TEST(TrainRunCadence, FittedWarmupIsTheFractionOfTheBudgetWithinOneAndTheRecipesWarmup) {
  TrainRecipe recipe;
  recipe.warmup = 1000;
  recipe.warmup_fraction = 0.25;
  EXPECT_EQ(fitted_warmup(recipe, 20), 5);
  EXPECT_EQ(fitted_warmup(recipe, 22), 6);  // 5.5 rounds away from zero
  EXPECT_EQ(fitted_warmup(recipe, 1), 1);   // at least one update
  EXPECT_EQ(fitted_warmup(recipe, 1e6), 1000);
}

// A decaying optimizer.schedule is fitted to the budget as the warmup is, warmup_fraction or not.
TEST(TrainRunCadence, ADecayingScheduleIsFittedToTheStepsOrTheTimeBudget) {
  TrainRecipe recipe;
  EXPECT_FALSE(schedule_fits_budget(recipe));  // the default: equation 3, nothing to fit
  recipe.warmup_fraction = 0.1;
  EXPECT_TRUE(schedule_fits_budget(recipe));
  recipe.warmup_fraction = 0;
  recipe.schedule = "linear";
  EXPECT_TRUE(schedule_fits_budget(recipe));
  recipe.max_steps = 300;
  EXPECT_EQ(WarmupFit(recipe, false).at_start([](const std::string&) { FAIL(); }), 300.0);
  EXPECT_EQ(describe_budget_length(recipe, 300, 0, 300), "training.max_steps");
  // A time budget: after the probe, as the warmup (estimates at most max_steps).
  recipe.schedule = "cosine";
  recipe.max_minutes = 1;
  WarmupFit fit(recipe, false);
  EXPECT_EQ(fit.at_start([](const std::string&) { FAIL(); }), std::nullopt);
  double now = 10;
  auto clock = [&] { return now; };
  EXPECT_EQ(fit.after_update(1, clock), std::nullopt);
  now = 10 + kWarmupProbeUpdates;  // 1 s an update, 30 s left
  EXPECT_EQ(fit.after_update(1 + kWarmupProbeUpdates, clock), 21.0 + 30.0);
  EXPECT_EQ(describe_budget_length(recipe, 300, 21, 51),
            "the updates training.max_minutes 1 allows, estimated after update 21");
  EXPECT_EQ(describe_budget_length(recipe, 300, 21, 300),
            "training.max_steps, fewer than training.max_minutes 1 allows");
  EXPECT_EQ(decay_end(69.5), 70);
  EXPECT_EQ(decay_end(0.2), 1);
}

// training.max_epochs is a budget in updates as soon as an epoch's updates are known: the schedule
// decays to zero and the checkpoints are spaced over the epochs' updates, as for max_steps.
TEST(TrainRunCadence, AnEpochBudgetIsABudgetOfUpdates) {
  TrainRecipe recipe;
  recipe.schedule = "linear";
  recipe.warmup_fraction = 0.25;
  recipe.checkpoint_every_fraction = 0.1;
  EXPECT_EQ(update_budget(recipe, 78.4), 0);  // no budget
  recipe.max_epochs = 10;
  EXPECT_EQ(update_budget(recipe, 78.4), 784);
  EXPECT_EQ(update_budget(recipe, 78.41), 785);  // rounded up: the last epoch's last update
  recipe.max_steps = 500;                        // the less of the two
  EXPECT_EQ(update_budget(recipe, 78.4), 500);
  EXPECT_EQ(describe_budget_length(recipe, 500, 0, 500), "training.max_steps");
  recipe.max_steps = 1000;
  const int64_t budget = update_budget(recipe, 78.4);
  EXPECT_EQ(budget, 784);
  EXPECT_EQ(describe_budget_length(recipe, budget, 0, 784), "training.max_epochs");

  WarmupFit fit(recipe, false);
  fit.set_update_budget(budget);
  EXPECT_EQ(fit.at_start([](const std::string&) { FAIL(); }), 784.0);
  EXPECT_EQ(fitted_warmup(recipe, 784), 196);
  EXPECT_EQ(checkpoint_interval(recipe, budget).steps, 78);  // round(78.4)

  // With a time budget as well, the epochs bound the time's estimate.
  recipe.max_minutes = 1;
  WarmupFit timed(recipe, false);
  timed.set_update_budget(budget);
  EXPECT_EQ(timed.at_start([](const std::string&) { FAIL(); }), std::nullopt);
  double now = 0;
  auto clock = [&] { return now; };
  EXPECT_EQ(timed.after_update(1, clock), std::nullopt);
  now = 0.01 * kWarmupProbeUpdates;                  // 0.01 s an update: 6000 more in the minute
  EXPECT_EQ(timed.probe_seconds_per_update(), 0.0);  // nothing estimated yet
  EXPECT_EQ(timed.after_update(1 + kWarmupProbeUpdates, clock), 784.0);
  // The speed the estimate assumed, for the log: updates 2 to 21 in 0.2 s.
  EXPECT_DOUBLE_EQ(timed.probe_seconds_per_update(), 0.01);
  EXPECT_EQ(timed.probe_first_step(), 2);
  EXPECT_EQ(describe_budget_length(recipe, budget, 21, 784),
            "training.max_epochs, fewer than training.max_minutes 1 allows");
}

// A decaying schedule under a time budget estimates its end again at the warmup's end, from the
// speed of every update timed so far (here slower than the first ones).
TEST(TrainRunCadence, ADecaysEndIsEstimatedAgainAtTheWarmupsEndFromTheSpeedSoFar) {
  TrainRecipe recipe;
  recipe.schedule = "linear";
  recipe.warmup_fraction = 0.25;
  recipe.max_minutes = 1;  // 60 s
  WarmupFit fit(recipe, false);
  double now = 1;
  auto clock = [&] { return now; };
  EXPECT_EQ(fit.after_update(1, clock), std::nullopt);  // the probe starts after update 1
  now = 1 + 0.1 * kWarmupProbeUpdates;                  // 0.1 s an update
  const std::optional<double> first = fit.after_update(1 + kWarmupProbeUpdates, clock);
  ASSERT_TRUE(first.has_value());
  EXPECT_NEAR(*first, 21 + 57 / 0.1, 1e-6);  // 591
  fit.set_fitted(true);
  fit.plan_decay_refit(148, 21);
  // Then 0.2 s an update: at update 148, 147 updates took 27.4 s since update 1.
  now = 3 + 127 * 0.2;
  EXPECT_EQ(fit.decay_refit(147, clock), std::nullopt);
  const std::optional<double> again = fit.decay_refit(148, clock);
  ASSERT_TRUE(again.has_value());
  const double per_update = (now - 1) / 147;
  EXPECT_NEAR(*again, 148 + (60 - now) / per_update, 1e-9);
  EXPECT_LT(*again, *first);
  EXPECT_EQ(fit.decay_refit(148, clock), std::nullopt);  // once
  // At most training.max_steps.
  recipe.max_steps = 200;
  WarmupFit capped(recipe, true);
  now = 1;
  EXPECT_EQ(capped.after_update(1, clock), std::nullopt);  // a resumed run times its updates too
  capped.plan_decay_refit(50, 10);
  now = 2;
  EXPECT_EQ(capped.decay_refit(50, clock), 200.0);
  // Not planned: a warmup already over (the rate would jump), a step budget, equation 3.
  WarmupFit over(recipe, true);
  over.after_update(1, clock);
  over.plan_decay_refit(30, 30);
  EXPECT_EQ(over.decay_refit(30, clock), std::nullopt);
  recipe.max_minutes = 0;
  WarmupFit steps(recipe, true);
  steps.after_update(1, clock);
  steps.plan_decay_refit(50, 10);
  EXPECT_EQ(steps.decay_refit(50, clock), std::nullopt);
  recipe.max_minutes = 1;
  recipe.schedule = "noam";
  WarmupFit noam(recipe, true);
  noam.after_update(1, clock);
  noam.plan_decay_refit(50, 10);
  EXPECT_EQ(noam.decay_refit(50, clock), std::nullopt);
}

// During a time budget's decay the end is estimated again whenever the run asks (at each
// checkpoint), from the speed of every update timed since the process's first.
TEST(TrainRunCadence, ADecaysEndIsEstimatedAgainDuringTheDecay) {
  TrainRecipe recipe;
  recipe.schedule = "cosine";
  recipe.max_minutes = 1;  // 60 s
  WarmupFit fit(recipe, false);
  double now = 1;
  auto clock = [&] { return now; };
  fit.after_update(1, clock);
  now = 11;  // 99 updates in 10 s after the first
  EXPECT_EQ(fit.decay_estimate(100, 50, clock), std::nullopt);  // not fitted yet
  fit.set_fitted(true);
  EXPECT_EQ(fit.decay_estimate(50, 50, clock), std::nullopt);  // the warmup is not over
  const std::optional<double> estimate = fit.decay_estimate(100, 50, clock);
  ASSERT_TRUE(estimate.has_value());
  EXPECT_NEAR(*estimate, 100 + 49 / (10.0 / 99), 1e-9);
  now = 31;  // slower: 199 updates in 30 s
  EXPECT_NEAR(*fit.decay_estimate(200, 50, clock), 200 + 29 / (30.0 / 199), 1e-9);
  EXPECT_NEAR(*fit.decay_estimate(200, 50, clock), 200 + 29 / (30.0 / 199), 1e-9);  // any time
  // At most training.max_steps; nothing for a step budget or equation 3.
  recipe.max_steps = 300;
  WarmupFit capped(recipe, true);
  capped.after_update(1, clock);
  now = 32;
  EXPECT_EQ(capped.decay_estimate(100, 50, clock), 300.0);
  recipe.max_minutes = 0;
  WarmupFit steps(recipe, true);
  steps.after_update(1, clock);
  EXPECT_EQ(steps.decay_estimate(100, 50, clock), std::nullopt);
  recipe.max_minutes = 1;
  recipe.schedule = "noam";
  WarmupFit noam(recipe, true);
  noam.after_update(1, clock);
  EXPECT_EQ(noam.decay_estimate(100, 50, clock), std::nullopt);
}

TEST(TrainRunCadence, AStepBudgetFitsTheWarmupAtTheStart) {
  TrainRecipe recipe;
  recipe.warmup_fraction = 0.25;
  recipe.max_steps = 20;
  std::vector<std::string> said;
  auto note = [&](const std::string& line) { said.push_back(line); };
  WarmupFit fit(recipe, false);
  EXPECT_EQ(fit.at_start(note), 20.0);
  EXPECT_TRUE(said.empty());
  // Off, or already fitted (a resumed run): nothing to fit.
  EXPECT_EQ(WarmupFit(recipe, true).at_start(note), std::nullopt);
  recipe.warmup_fraction = 0;
  EXPECT_EQ(WarmupFit(recipe, false).at_start(note), std::nullopt);
}

TEST(TrainRunCadence, WithoutABudgetTheRecipesWarmupStaysAndSaysSo) {
  TrainRecipe recipe;
  recipe.warmup = 300;
  recipe.warmup_fraction = 0.1;
  std::vector<std::string> said;
  WarmupFit fit(recipe, false);
  EXPECT_EQ(fit.at_start([&](const std::string& line) { said.push_back(line); }), std::nullopt);
  EXPECT_TRUE(fit.fitted());
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "optimizer.warmup_fraction needs a budget (training.max_steps, max_epochs or "
            "max_minutes): warmup 300");
}

TEST(TrainRunCadence, ATimeBudgetFitsTheWarmupFromTheSpeedOfTheUpdatesAfterTheFirst) {
  TrainRecipe recipe;
  recipe.warmup_fraction = 0.1;
  recipe.max_minutes = 10;  // 600 s
  WarmupFit fit(recipe, false);
  EXPECT_EQ(fit.at_start([](const std::string&) { FAIL(); }), std::nullopt);
  EXPECT_FALSE(fit.fitted());
  double now = 0;
  auto clock = [&] { return now; };
  // The first update (start-up included) starts the probe at 30 s.
  now = 30;
  EXPECT_EQ(fit.after_update(1, clock), std::nullopt);
  for (int64_t step = 2; step < 1 + kWarmupProbeUpdates; ++step) {
    now = 30 + 2.0 * static_cast<double>(step - 1);
    EXPECT_EQ(fit.after_update(step, clock), std::nullopt) << step;
  }
  // 20 updates in 40 s: 2 s an update, 530 s left -> 21 + 265 updates.
  now = 70;
  EXPECT_EQ(fit.after_update(1 + kWarmupProbeUpdates, clock), 21.0 + 265.0);
  // A step budget below that is the bound.
  recipe.max_steps = 100;
  WarmupFit bounded(recipe, false);
  EXPECT_EQ(bounded.at_start([](const std::string&) { FAIL(); }), std::nullopt);
  now = 30;
  EXPECT_EQ(bounded.after_update(1, clock), std::nullopt);
  now = 70;
  EXPECT_EQ(bounded.after_update(1 + kWarmupProbeUpdates, clock), 100.0);
  // Once fitted, nothing more.
  bounded.set_fitted(true);
  EXPECT_EQ(bounded.after_update(50, clock), std::nullopt);
}

// model.dropout auto: 0 for a few epochs, 0.1 for about ten, 0.3 for more (the measured runs of
// docs/RESULTS.md at 2.4, 7.6 and 24 epochs, split at the geometric middles); and the run fits it
// with the schedule, so that it has a budget's estimate to choose from.
TEST(TrainRunCadence, DropoutAutoGrowsWithTheEpochsOfTheBudget) {
  EXPECT_EQ(dropout_for_epochs(0.5), 0.0);
  EXPECT_EQ(dropout_for_epochs(2.4), 0.0);
  EXPECT_EQ(dropout_for_epochs(4.2), 0.0);
  EXPECT_EQ(dropout_for_epochs(4.4), 0.1);
  EXPECT_EQ(dropout_for_epochs(7.6), 0.1);
  EXPECT_EQ(dropout_for_epochs(13.4), 0.1);
  EXPECT_EQ(dropout_for_epochs(13.6), 0.3);
  EXPECT_EQ(dropout_for_epochs(24), 0.3);
  EXPECT_EQ(dropout_for_epochs(1000), 0.3);

  TrainRecipe recipe;  // noam, no warmup_fraction: nothing to fit ...
  EXPECT_FALSE(schedule_fits_budget(recipe));
  recipe.model_overrides["dropout"] = "auto";  // ... but the dropout
  EXPECT_TRUE(schedule_fits_budget(recipe));
}

TEST(TrainRunCadence, CheckpointIntervalsShrinkToTheFractionOfTheBudget) {
  TrainRecipe recipe;
  recipe.checkpoint_every_steps = 0;
  recipe.checkpoint_every_minutes = 10;
  CheckpointInterval interval = checkpoint_interval(recipe, 0);
  EXPECT_EQ(interval.steps, 0);
  EXPECT_EQ(interval.minutes, 10.0);
  recipe.checkpoint_every_fraction = 0.25;
  recipe.max_steps = 22;
  recipe.max_minutes = 8;
  interval = checkpoint_interval(recipe, recipe.max_steps);
  EXPECT_EQ(interval.steps, 6);      // round(5.5)
  EXPECT_EQ(interval.minutes, 2.0);  // the less of 10 and a quarter of 8
  EXPECT_EQ(describe_checkpoint_interval(interval, 4),
            "checkpoints every 2.00 minutes or 6 updates, keeping the last 4");
  EXPECT_EQ(describe_checkpoint_interval({3, 0}, 5),
            "checkpoints every 3 updates, keeping the last 5");
}

TEST(TrainRunCadence, ACheckpointIsDueAnIntervalAfterTheLastOne) {
  CheckpointCadence by_steps({2, 0}, 10, 100.0);
  EXPECT_FALSE(by_steps.due(11, 1e9));  // not by time
  EXPECT_TRUE(by_steps.due(12, 0));
  by_steps.saved(12, 130.0);
  EXPECT_EQ(by_steps.last_step(), 12);
  EXPECT_FALSE(by_steps.due(13, 0));
  CheckpointCadence by_time({0, 1.5}, 0, 100.0);
  EXPECT_FALSE(by_time.due(1000, 189.0));
  EXPECT_TRUE(by_time.due(1, 190.0));
  by_time.saved(1, 190.0);
  EXPECT_FALSE(by_time.due(2, 200.0));
}

TEST(TrainRunCadence, LimitsAndValidation) {
  TrainRecipe recipe;
  EXPECT_FALSE(limits_reached(recipe, 1000000, 1000, 1e9));  // none set
  recipe.max_steps = 10;
  EXPECT_FALSE(limits_reached(recipe, 9, 0, 0));
  EXPECT_TRUE(limits_reached(recipe, 10, 0, 0));
  recipe.max_steps = 0;
  recipe.max_epochs = 2;
  EXPECT_TRUE(limits_reached(recipe, 1, 2, 0));
  recipe.max_epochs = 0;
  recipe.max_minutes = 0.5;
  EXPECT_FALSE(limits_reached(recipe, 1, 0, 29.9));
  EXPECT_TRUE(limits_reached(recipe, 1, 0, 30));

  recipe.validate_every_steps = 4;
  EXPECT_TRUE(validation_due(recipe, 8, false));
  EXPECT_FALSE(validation_due(recipe, 9, true));
  recipe.validate_every_steps = 0;  // at the end of each epoch
  EXPECT_TRUE(validation_due(recipe, 9, true));
  EXPECT_FALSE(validation_due(recipe, 8, false));
}

TEST(TrainRunCadence, NonFiniteUpdatesStopTheRunAfterFiveInARow) {
  NonFiniteUpdates updates;
  for (int64_t i = 1; i < kMaxNonFiniteUpdatesInARow; ++i) {
    EXPECT_EQ(updates.skipped(), i);
    updates.check(10 + i, 2.0, "");
  }
  updates.finite();
  for (int64_t i = 1; i < kMaxNonFiniteUpdatesInARow; ++i) updates.skipped();
  EXPECT_EQ(updates.skipped(), kMaxNonFiniteUpdatesInARow);
  expect_error([&] { updates.check(17, 2.0, ""); },
               {"step 17: the loss or gradient norm was not finite in 5 updates in a row (is "
                "optimizer.lr_scale 2 too high?); stopped without saving; the last checkpoint is "
                "none"});
  expect_error([&] { updates.check(17, 2.0, "run/checkpoints/step-000000012"); },
               {"the last checkpoint is run/checkpoints/step-000000012"});
}

TEST(TrainRunProgress, TheWindowAveragesOverTargetTokensAndTheLineSaysWhereTheRunStands) {
  ProgressWindow window;
  UpdateResult a, b;
  a.loss = 2.0, a.nll = 1.0, a.target_tokens = 30, a.source_tokens = 20;
  b.loss = 4.0, b.nll = 3.0, b.target_tokens = 10, b.source_tokens = 40;
  window.add(a);
  window.add(b);
  const ProgressWindow::Totals totals = window.totals();
  EXPECT_DOUBLE_EQ(totals.loss, (2.0 * 30 + 4.0 * 10) / 40);
  EXPECT_DOUBLE_EQ(totals.perplexity, std::exp((1.0 * 30 + 3.0 * 10) / 40));
  EXPECT_GT(totals.seconds, 0);
  EXPECT_DOUBLE_EQ(totals.seconds_per_update, totals.seconds / 2);
  EXPECT_DOUBLE_EQ(totals.tokens_per_second, 100 / totals.seconds);

  ProgressWindow::Totals fixed;
  fixed.loss = 5.12344, fixed.perplexity = 123.456, fixed.tokens_per_second = 1234.4;
  ProgressPoint at;
  at.step = 4, at.epoch = 1, at.epoch_fraction = 0.5, at.learning_rate = 0.000123456;
  at.elapsed = 3723, at.remaining = 5;
  EXPECT_EQ(progress_line(at, fixed),
            "step 4 | epoch 1 (50%) | loss 5.1234 | ppl 123.46 | lr 0.000123 | 1234 tok/s | "
            "1:02:03 elapsed | 0:00:05 left");
  at.remaining = -1;
  EXPECT_EQ(progress_line(at, fixed).find("left"), std::string::npos);
}

TEST(TrainRunProgress, TimeLeftIsTheSoonerOfTheBudgets) {
  TrainRecipe recipe;
  EXPECT_EQ(time_left(recipe, 5, 2.0, 100), -1);
  recipe.max_steps = 10;
  EXPECT_EQ(time_left(recipe, 5, 2.0, 100), 10.0);
  recipe.max_minutes = 2;  // 120 s: 20 left
  EXPECT_EQ(time_left(recipe, 5, 2.0, 100), 10.0);
  EXPECT_EQ(time_left(recipe, 5, 5.0, 100), 20.0);
  recipe.max_steps = 0;
  EXPECT_EQ(time_left(recipe, 5, 5.0, 100), 20.0);
  EXPECT_EQ(clock_text(59.9), "0:00:59");
}

}  // namespace
}  // namespace tfm::internal
