#include "tfm/train/run_state.h"

#include <filesystem>
#include <system_error>

#include "tfm/core/error.h"
#include "tfm/core/tensor.h"

namespace fs = std::filesystem;

namespace tfm::internal {

bool prepare_run_directory(const TrainRecipe& recipe, bool resume,
                           const std::function<void(const std::string&)>& note) {
  const fs::path checkpoint_dir = fs::path(recipe.run_dir) / "checkpoints";
  // Found now, not at the first checkpoint after minutes of training.
  std::error_code ec;
  const fs::file_status status = fs::status(checkpoint_dir, ec);
  TFM_CHECK(status.type() == fs::file_type::not_found || status.type() == fs::file_type::directory,
            "{}: {}; the run keeps its checkpoints in this folder", checkpoint_dir.string(),
            ec ? ec.message() : "exists and is not a directory");
  clean_checkpoint_folder(checkpoint_dir, note);
  const bool has_checkpoints = !list_checkpoints(checkpoint_dir).empty();
  if (!resume && has_checkpoints)
    fail("{} already holds checkpoints: continue it with --resume, or choose another run_dir",
         recipe.run_dir);
  return has_checkpoints;
}

RunStart run_start_from(const TrainingState& state, const TrainRecipe& recipe) {
  RunStart start;
  start.elapsed_before = state.extra.value("elapsed_s", 0.0);
  start.first_step = state.step;
  if (state.extra.contains("steps_by_products") && state.extra["steps_by_products"].is_object())
    start.steps_by_products = state.extra["steps_by_products"];
  else if (state.step > 0)
    start.steps_by_products["unrecorded"] = state.step;
  if (recipe.warmup_fraction > 0 && state.extra.contains("fitted_warmup"))
    start.fitted_warmup = state.extra.value("fitted_warmup", recipe.warmup);
  if (recipe.schedule != "noam" && state.extra.contains("decay_end"))
    start.decay_end = state.extra.value("decay_end", int64_t{1});
  if (start.decay_end && state.extra.contains("decay_from")) {
    start.decay_from = state.extra.value("decay_from", int64_t{1});
    start.decay_from_progress = state.extra.value("decay_from_progress", 0.0);
  }
  return start;
}

TrainingState checkpoint_state(const TrainRecipe& recipe, const RunPosition& at,
                               const RunStart& start, const std::string& products) {
  TrainingState state;
  state.step = at.step;
  state.epoch = at.data.epoch;
  state.batch_in_epoch = at.data.batch;
  state.seed = recipe.seed;
  // max_tokens and accumulate: what a resume with `auto` keeps (run_batch_size).
  state.extra = {{"elapsed_s", at.elapsed_seconds},
                 {"batcher_fingerprint", at.batcher_fingerprint},
                 {"max_tokens", recipe.max_tokens},
                 {"accumulate", recipe.accumulate}};
  if (recipe.warmup_fraction > 0 && at.fitted_warmup)
    state.extra["fitted_warmup"] = *at.fitted_warmup;
  if (recipe.schedule != "noam" && at.decay_end) {
    state.extra["decay_end"] = *at.decay_end;
    if (at.decay_from) {
      state.extra["decay_from"] = *at.decay_from;
      state.extra["decay_from_progress"] = at.decay_from_progress;
    }
  }
  nlohmann::json by_products = start.steps_by_products;
  by_products[products] = by_products.value(products, int64_t{0}) + at.step - start.first_step;
  state.extra["steps_by_products"] = by_products;
  return state;
}

void check_parameters_finite(const nn::NamedTensors& parameters, int64_t step,
                             const std::string& last_checkpoint) {
  for (const auto& [name, tensor] : parameters)
    TFM_CHECK(first_non_finite(tensor) < 0,
              "step {}: parameter '{}' holds a non-finite value: not saving it; the last "
              "checkpoint is {}",
              step, name, last_checkpoint.empty() ? "none" : last_checkpoint);
}

}  // namespace tfm::internal
