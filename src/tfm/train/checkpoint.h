// Training checkpoints. A checkpoint is a directory `step-NNNNNNNNN` inside a run's checkpoint
// folder:
//   config.json, model.safetensors   a complete model directory (translate and average read it)
//   optimizer.safetensors            Adam's moments "m.<param>" / "v.<param>", its step count
//   state.json                       where training stands: step, epoch, batch within the epoch,
//                                    seed, and the trainer's own fields
//   vocab.model                      the run's vocabulary
//   ema/                             with training.ema_decay: the moving average of the weights,
//                                    a complete model directory of its own (translate -m reads it)
// It is written into `step-N.partial-<pid>` and renamed when complete, so a run killed while
// writing leaves a partial folder that is ignored, never a damaged checkpoint under a final name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tfm/model/config.h"
#include "tfm/nn/layers.h"
#include "tfm/train/adam.h"

namespace tfm::internal {

struct TrainingState {
  int64_t step = 0;            // optimizer updates done
  int64_t epoch = 0;           // epoch in progress (0-based)
  int64_t batch_in_epoch = 0;  // batches of that epoch already consumed
  uint64_t seed = 0;
  nlohmann::json extra = nlohmann::json::object();  // trainer fields (elapsed time, best loss...)
};

struct Checkpoint {
  std::filesystem::path dir;
  ModelConfig config;
  nn::NamedTensors parameters;
  std::vector<Tensor> adam_m,
      adam_v;  // in parameter order; empty when the optimizer file is absent
  int64_t adam_steps = 0;
  TrainingState state;
  nn::NamedTensors moving_average;  // ema/'s parameters; empty when it has none
};

// The folder of a checkpoint's moving average of the weights, a model directory.
inline constexpr const char* kMovingAverageDir = "ema";

// Writes a checkpoint of the model and optimizer under `folder` and returns its directory. Files
// that sit beside the model are copied from `extra_files`; one named vocab.model is the model's
// vocabulary, its checksum recorded in model.safetensors (model/model_dir.h). A non-empty
// `moving_average` is written as the model directory ema/ inside it, with the same vocabulary.
std::filesystem::path save_checkpoint(const std::filesystem::path& folder,
                                      const ModelConfig& config, const nn::NamedTensors& parameters,
                                      const Adam& optimizer, const TrainingState& state,
                                      const std::vector<std::filesystem::path>& extra_files = {},
                                      const nn::NamedTensors& moving_average = {});

// Complete checkpoints under `folder`, oldest first (by step).
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& folder);
// The newest `count` (>= 1) complete checkpoints under `folder`, oldest first (all of them when
// there are fewer); an error when the folder does not exist or holds none.
std::vector<std::filesystem::path> newest_checkpoints(const std::filesystem::path& folder,
                                                      int64_t count);

// A checkpoint's state.json alone (no tensors read); errors name the file.
TrainingState load_training_state(const std::filesystem::path& dir);

// Loads and checks one checkpoint (with the optimizer: its moving average too, when it has one);
// errors name the file.
Checkpoint load_checkpoint(const std::filesystem::path& dir, bool with_optimizer = true);

// The newest checkpoint that loads; one that fails (a damaged or altered file, a non-finite value)
// is moved aside as "step-N.damaged", reported through `warn`, and the previous one is tried.
// nullopt when there is none.
std::optional<Checkpoint> load_latest_checkpoint(
    const std::filesystem::path& folder, const std::function<void(const std::string&)>& warn);

// Removes what a killed run left in `folder` (partial folders, half-deleted checkpoints), saying so
// through `warn`. Call it with the run directory locked.
void clean_checkpoint_folder(const std::filesystem::path& folder,
                             const std::function<void(const std::string&)>& warn);

// Deletes all but the newest `keep` complete checkpoints (damaged ones moved aside do not count)
// and, quietly, what clean_checkpoint_folder removes.
void prune_checkpoints(const std::filesystem::path& folder, int keep);

// Averages the parameters of model directories (checkpoints) of one configuration into `out` (a
// model directory); the paper averages the last 5 (base) or 20 (big) checkpoints.
void average_models(const std::vector<std::filesystem::path>& inputs,
                    const std::filesystem::path& out);

}  // namespace tfm::internal
