// tfm::train: a recipe run into a run directory, as `tfm train` runs it.
#include "tfm/train.h"

#include <nlohmann/json.hpp>

#include "tfm/dist/communicator.h"
#include "tfm/eval/validation_bleu.h"
#include "tfm/train/train_loop.h"

namespace tfm {

TrainingResult train(const TrainingOptions& options) {
  TrainRecipe recipe = options.recipe.empty() ? TrainRecipe{} : load_recipe(options.recipe);
  for (const std::string& assignment : options.overrides) apply_override(recipe, assignment);
  if (!options.run_dir.empty()) recipe.run_dir = options.run_dir.string();
  if (options.max_steps >= 0) recipe.max_steps = options.max_steps;
  if (options.max_minutes >= 0) recipe.max_minutes = options.max_minutes;
  if (options.threads >= 0) recipe.threads = options.threads;
  if (!options.device.empty()) apply_override(recipe, "training.device=" + options.device);
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
