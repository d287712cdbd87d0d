// data.max_tokens and data.accumulate of a training run, `auto` resolved (train/batch_size.h), the
// same on every rank: from the memory each rank may use (the least of them; ranks on one host share
// its RAM), or, for a resumed run, from its newest checkpoint, so that the batches stay those of
// the run (an estimate from memory measured now would differ a little and change the batch plan).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/dist/communicator.h"
#include "tfm/model/config.h"
#include "tfm/train/batch_size.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {

// Rank 0 decides (it alone reads the run directory: `has_checkpoints`), says so through `note`
// and tells the others. The recipe's numbers as they are when none is `auto` and
// data.update_tokens is off. With max_tokens auto on the CPU it also limits the host's caching
// allocator to what the batches may use.
BatchSize run_batch_size(const TrainRecipe& recipe, const ModelConfig& config, Device device,
                         DType precision, dist::Communicator& comm, bool has_checkpoints,
                         const std::function<void(const std::string&)>& note);

// A resumed run's batch size: where the recipe says `auto`, what its newest checkpoint
// (`checkpoint_name`) recorded in state.json (`extra`: "max_tokens" and "accumulate") replaces
// `chosen`. Returns what the batch size line adds when that changed the choice ("; resuming:
// ..."), else "".
std::string keep_recorded_batch_size(const TrainRecipe& recipe, const nlohmann::json& extra,
                                     const std::string& checkpoint_name, BatchSize& chosen);

}  // namespace tfm::internal
