#include "tfm/io/progress_meter.h"

#include <fmt/format.h>

#include <utility>

namespace tfm::internal {

std::string duration_text(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {:02} s", s / 60, s % 60);
  return fmt::format("{} h {:02} min", s / 3600, s % 3600 / 60);
}

ProgressMeter::ProgressMeter(std::function<void(const std::string&)> report, std::string what,
                             std::string unit, double every_seconds)
    : report_(std::move(report)),
      what_(std::move(what)),
      unit_(std::move(unit)),
      every_seconds_(every_seconds),
      started_(Clock::now()),
      last_(started_) {}

void ProgressMeter::update(int64_t count, double fraction) {
  if (!report_) return;
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_).count() < every_seconds_) return;
  last_ = now;
  const double seconds = std::chrono::duration<double>(now - started_).count();
  std::string text =
      fmt::format("{}: {} {}, {:.1f}k {}/s, {:.0f}% read", what_, count, unit_,
                  static_cast<double>(count) / seconds / 1000, unit_, 100 * fraction);
  if (fraction > 0.01)
    text += fmt::format(", about {} left", duration_text(seconds * (1 - fraction) / fraction));
  report_(text);
}

}  // namespace tfm::internal
