#include "tfm/train/run_metrics.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/io/atomic_file.h"

namespace tfm::internal {

MetricsLog::MetricsLog(const std::filesystem::path& path,
                       std::function<void(const nlohmann::json&)> on_record)
    : out_(std::in_place, path, std::ios::app), on_record_(std::move(on_record)) {
  TFM_CHECK(out_->good(), "{}: cannot open for writing: {}", path.string(), std::strerror(errno));
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_) return;
  *out_ << record.dump() << "\n";
  out_->flush();
  if (on_record_) on_record_(record);
}

void drop_replayed_metrics(const std::filesystem::path& path, int64_t resumed_step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_discarded() && record.is_object() &&
        record.value("step", int64_t{0}) > resumed_step) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  kept += nlohmann::json{{"type", "resume"}, {"step", resumed_step}, {"dropped", dropped}}.dump() +
          "\n";
  write_file_atomically(path, kept);
}

}  // namespace tfm::internal
