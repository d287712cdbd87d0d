// A training run's metrics.jsonl: one JSON object per line ("train", "valid", "skipped" and
// "resume" records; docs/TRAINING.md, "Progress and metrics").
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

namespace tfm::internal {

// Appends records to metrics.jsonl and hands each, once written, to `on_record` (when given).
// Default-constructed, it writes nothing and calls nothing (ranks other than 0).
class MetricsLog {
 public:
  MetricsLog() = default;
  MetricsLog(const std::filesystem::path& path,
             std::function<void(const nlohmann::json&)> on_record);
  void write(const nlohmann::json& record);

 private:
  std::optional<std::ofstream> out_;
  std::function<void(const nlohmann::json&)> on_record_;
};

// A resumed run repeats the updates after its checkpoint: their records, written by the run that
// was stopped, are dropped from metrics.jsonl (so that each step appears once) and a "resume"
// record says how many. Nothing happens when the file does not exist.
void drop_replayed_metrics(const std::filesystem::path& path, int64_t resumed_step);

}  // namespace tfm::internal
