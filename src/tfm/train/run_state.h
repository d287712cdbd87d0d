// Where a training run starts and what its checkpoints record besides the model and Adam: the run
// directory as rank 0 finds it, the state a resumed run continues from, and the state.json a
// checkpoint saves (train/checkpoint.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tfm/data/batcher.h"
#include "tfm/nn/layers.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {

// Rank 0's view of the run directory: "checkpoints" must be a folder (or not exist yet), damaged
// checkpoints are set aside (said through `note`), and a new run (`resume` false) must not
// overwrite checkpoints. Returns whether it holds checkpoints. Call it with the directory locked.
bool prepare_run_directory(const TrainRecipe& recipe, bool resume,
                           const std::function<void(const std::string&)>& note);

// What a run carries from the checkpoint it resumes (or starts without one).
struct RunStart {
  double elapsed_before = 0;  // the seconds trained before
  int64_t first_step = 0;     // the step this process starts from
  // The updates by the products they ran in ({"f32": 900, "bf16": 600}), kept in every checkpoint
  // so that a run resumed on another machine (where `auto` may choose otherwise) says so.
  nlohmann::json steps_by_products = nlohmann::json::object();
  // The warmup fitted to the budget (optimizer.warmup_fraction) when the run started.
  std::optional<int64_t> fitted_warmup;
  // The update at which a decaying optimizer.schedule reaches zero, as last estimated.
  std::optional<int64_t> decay_end;
  // Where the decay's progress was last anchored when its end moved during the decay
  // (NoamSchedule::decay_from, decay_from_progress); absent: the warmup's end.
  std::optional<int64_t> decay_from;
  double decay_from_progress = 0.0;
};

// From a checkpoint's state. A checkpoint written before the products were counted counts its
// steps as "unrecorded"; a fitted warmup is kept only while optimizer.warmup_fraction is on, the
// decay's end only while optimizer.schedule decays.
RunStart run_start_from(const TrainingState& state, const TrainRecipe& recipe);

// Where a run stands when it saves a checkpoint.
struct RunPosition {
  int64_t step = 0;
  data::Batcher::State data;  // the batcher's position
  uint64_t batcher_fingerprint = 0;
  double elapsed_seconds = 0;
  std::optional<int64_t> fitted_warmup;  // when optimizer.warmup_fraction fitted it
  std::optional<int64_t> decay_end;      // when a decaying optimizer.schedule was fitted
  std::optional<int64_t> decay_from;     // when the decay's end moved during the decay
  double decay_from_progress = 0.0;
};

// The state.json of a checkpoint at `at`: the data position, the seed, and the trainer's fields
// (elapsed_s, batcher_fingerprint, the batch size a resume with `auto` keeps, fitted_warmup,
// decay_end, decay_from, decay_from_progress and steps_by_products, which adds this process's
// updates in `products` to `start`'s).
TrainingState checkpoint_state(const TrainRecipe& recipe, const RunPosition& at,
                               const RunStart& start, const std::string& products);

// A non-finite parameter is not saved: the error names it, the step and the last checkpoint.
void check_parameters_finite(const nn::NamedTensors& parameters, int64_t step,
                             const std::string& last_checkpoint);

}  // namespace tfm::internal
