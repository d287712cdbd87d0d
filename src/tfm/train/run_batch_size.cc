#include "tfm/train/run_batch_size.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "tfm/core/allocator.h"
#include "tfm/core/error.h"
#include "tfm/ops/device.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/rank_agreement.h"

namespace fs = std::filesystem;

namespace tfm::internal {

namespace {

// With max_tokens auto: the memory this rank may use (the least of the ranks' shares) and the
// estimate, into `request`; returns where the figure comes from.
std::string measure_memory(BatchSizeRequest& request, const ModelConfig& config, int64_t length,
                           Device device, DType precision, dist::Communicator& comm) {
  const ops::MemoryAvailable seen = ops::memory_available(device);
  int64_t share = seen.bytes;
  if (device == Device::cpu && comm.size() > 1) share /= local_ranks();
  uint64_t least = static_cast<uint64_t>(std::max<int64_t>(share, 0));
  for (uint64_t other : comm.all_gather(least)) least = std::min(least, other);
  request.memory_bytes = static_cast<int64_t>(least);
  request.memory = estimate_training_memory(config, length, precision, device);
  // The host's caching allocator would otherwise keep every size class at its own high-water
  // mark over batches of varying shapes, well past one step's peak (a GPU's returns its cache
  // when the device is full). What the allocator holds now is not in the memory seen.
  if (device == Device::cpu) {
    CachingAllocator& host = CachingAllocator::cpu();
    const AllocatorStats held = host.stats();
    host.set_cache_limit(
        held.bytes_in_use + held.bytes_cached +
        static_cast<size_t>(static_cast<double>(request.memory_bytes) * request.safety_fraction));
  }
  return seen.source + (comm.size() > 1 ? ", the least of the ranks' shares" : "");
}

// Rank 0's choice, said through `note`.
BatchSize choose_on_rank0(const TrainRecipe& recipe, const ModelConfig& config, DType precision,
                          const BatchSizeRequest& request, const std::string& source,
                          int64_t length, bool has_checkpoints,
                          const std::function<void(const std::string&)>& note) {
  BatchSize chosen = choose_batch_size(request);
  std::string line = describe_batch_size(
      request, chosen, source,
      fmt::format("{} layers, d_model {}, max_length {}, {} products", config.layers,
                  config.d_model, length, dtype_name(precision)));
  const bool automatic = recipe.max_tokens == kAutoBatch || recipe.accumulate == kAutoBatch;
  if (automatic && has_checkpoints) {
    const std::vector<fs::path> saved = list_checkpoints(fs::path(recipe.run_dir) / "checkpoints");
    // A damaged state.json gives no recorded batch size here; the resume then reports it.
    nlohmann::json extra;
    try {
      extra = load_training_state(saved.back()).extra;
    } catch (const Error&) {
    }
    line += keep_recorded_batch_size(recipe, extra, saved.back().filename().string(), chosen);
  }
  note(line);
  return chosen;
}

}  // namespace

std::string keep_recorded_batch_size(const TrainRecipe& recipe, const nlohmann::json& extra,
                                     const std::string& checkpoint_name, BatchSize& chosen) {
  if (!extra.is_object() || !extra.contains("max_tokens") || !extra.contains("accumulate"))
    return "";
  const BatchSize fresh = chosen;
  if (recipe.max_tokens == kAutoBatch) chosen.max_tokens = extra["max_tokens"].get<int64_t>();
  if (recipe.accumulate == kAutoBatch) chosen.accumulate = extra["accumulate"].get<int64_t>();
  if (chosen.max_tokens == fresh.max_tokens && chosen.accumulate == fresh.accumulate) return "";
  return fmt::format(
      "; resuming: max_tokens {} x accumulate {} as {} was trained{}", chosen.max_tokens,
      chosen.accumulate, checkpoint_name,
      fresh.memory_tokens > 0 && fresh.memory_tokens < chosen.max_tokens
          ? fmt::format(" (more than the {} tokens the memory holds by the estimate)",
                        fresh.memory_tokens)
          : "");
}

BatchSize run_batch_size(const TrainRecipe& recipe, const ModelConfig& config, Device device,
                         DType precision, dist::Communicator& comm, bool has_checkpoints,
                         const std::function<void(const std::string&)>& note) {
  BatchSizeRequest request;
  request.max_tokens = recipe.max_tokens;
  request.accumulate = recipe.accumulate;
  request.update_tokens = recipe.update_tokens;
  request.ranks = comm.size();
  request.safety_fraction = recipe.memory_fraction;
  const int64_t length = std::min(recipe.max_length, config.max_positions);
  request.min_tokens = 2 * length;
  std::string source;
  if (recipe.max_tokens == kAutoBatch)
    source = measure_memory(request, config, length, device, precision, comm);
  const bool automatic = recipe.max_tokens == kAutoBatch || recipe.accumulate == kAutoBatch;
  if (!automatic && recipe.update_tokens == 0) {
    BatchSize given;
    given.max_tokens = recipe.max_tokens;
    given.accumulate = recipe.accumulate;
    given.ranks = comm.size();
    return given;
  }
  nlohmann::json decided;
  if (comm.rank() == 0) {
    const BatchSize chosen =
        choose_on_rank0(recipe, config, precision, request, source, length, has_checkpoints, note);
    decided = {{"max_tokens", chosen.max_tokens}, {"accumulate", chosen.accumulate}};
  }
  if (comm.size() > 1) decided = nlohmann::json::parse(broadcast_text(comm, decided.dump()));
  BatchSize result;
  result.max_tokens = decided["max_tokens"].get<int64_t>();
  result.accumulate = decided["accumulate"].get<int64_t>();
  result.ranks = comm.size();
  return result;
}

}  // namespace tfm::internal
