// tfm::train: a recipe run into a run directory, as `tfm train` runs it.
#include "tfm/train.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "tfm/core/error.h"
#include "tfm/dist/communicator.h"
#include "tfm/eval/validation_bleu.h"
#include "tfm/train/train_loop.h"

namespace tfm {

using namespace internal;  // the library's layers, which these public calls wrap

namespace {

// The options' own numbers: -1 is "not given", anything else must be a valid budget (the
// recipe's checks only see what is copied into it, and -2 or NaN would be dropped silently).
void check_options(const TrainingOptions& o) {
  TFM_CHECK(o.max_steps == -1 || o.max_steps >= 0,
            "max_steps must be >= 0 (or -1: the recipe's), got {}", o.max_steps);
  TFM_CHECK(std::isfinite(o.max_minutes) && (o.max_minutes == -1 || o.max_minutes >= 0),
            "max_minutes must be a finite number >= 0 (or -1: the recipe's), got {}",
            o.max_minutes);
  TFM_CHECK(o.threads >= -1, "threads must be >= 0 (or -1: the recipe's), got {}", o.threads);
}

}  // namespace

TrainingResult train(const TrainingOptions& options) {
  check_options(options);
  TrainRecipe recipe = options.recipe.empty() ? TrainRecipe{} : load_recipe(options.recipe);
  for (const std::string& assignment : options.overrides) apply_override(recipe, assignment);
  // A value given here replaces the recipe's, and so does where validate() says it came from.
  if (!options.run_dir.empty()) {
    recipe.run_dir = options.run_dir.string();
    recipe.origins["training.run_dir"] = "run_dir";
  }
  if (options.max_steps >= 0) {
    recipe.max_steps = options.max_steps;
    recipe.origins["training.max_steps"] = "max_steps";
  }
  if (options.max_minutes >= 0) {
    recipe.max_minutes = options.max_minutes;
    recipe.origins["training.max_minutes"] = "max_minutes";
  }
  if (options.threads >= 0) {
    recipe.threads = options.threads;
    recipe.origins["training.threads"] = "threads";
  }
  if (options.device)
    apply_override(recipe, "training.device=" + std::string(to_string(*options.device)));
  TrainRunOptions run;
  run.resume = options.resume;
  run.bleu = eval::greedy_validation_score;
  // Started by mpirun or srun as one of several ranks: a data-parallel job (docs/DISTRIBUTED.md).
  run.communicator = &dist::world();
  if (options.progress)
    run.on_record = [&options](const nlohmann::json& record) {
      const std::string kind = record.value("type", "");
      if (kind != "train" && kind != "valid") return;  // "skipped", "resume"
      TrainingProgress progress;
      progress.kind = kind;
      progress.step = record.value("step", int64_t{0});
      progress.epoch = record.value("epoch", int64_t{0});
      progress.loss = record.value("loss", 0.0);
      progress.perplexity = record.value("perplexity", 0.0);
      progress.learning_rate = record.value("lr", 0.0);
      progress.tokens_per_second = record.value("tokens_per_second", 0.0);
      progress.bleu = record.value("bleu", record.value("f1", -1.0));
      progress.elapsed_seconds = record.value("elapsed_s", 0.0);
      options.progress(progress);
    };
  const TrainSummary summary = run_training(recipe, run);
  TrainingResult result;
  result.steps = summary.steps;
  result.elapsed_seconds = summary.elapsed_seconds;
  result.last_valid_loss = summary.last_valid_loss;
  result.last_valid_bleu = summary.last_valid_bleu;
  result.interrupted = summary.interrupted;
  result.last_checkpoint = summary.last_checkpoint;
  return result;
}

}  // namespace tfm
