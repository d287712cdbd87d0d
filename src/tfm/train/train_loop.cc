#include "tfm/train/train_loop.h"

#include "tfm/train/training_run.h"

namespace tfm::internal {

TrainSummary run_training(const TrainRecipe& recipe, const TrainRunOptions& options) {
  TrainingRun run(recipe, options);
  return run.run();
}

}  // namespace tfm::internal
