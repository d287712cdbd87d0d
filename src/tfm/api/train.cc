// tfm::train: a recipe run into a run directory, as `tfm train` runs it.
#include "tfm/train.h"

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
