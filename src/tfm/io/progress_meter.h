// One-line progress reports of a long pass over a file, every few seconds: the count so far, its
// rate, the share of the input read and the time left at that pace.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace tfm::internal {

// "42 s", "3 min 05 s", "2 h 10 min".
std::string duration_text(double seconds);

class ProgressMeter {
 public:
  // `report` may be empty (then nothing is reported); `unit` names what is counted ("pairs").
  ProgressMeter(std::function<void(const std::string&)> report, std::string what, std::string unit,
                double every_seconds = 5);

  // Reports when every_seconds have passed since the last report: `count` done, `fraction` of the
  // input read (in [0, 1]).
  void update(int64_t count, double fraction);

 private:
  using Clock = std::chrono::steady_clock;
  std::function<void(const std::string&)> report_;
  std::string what_, unit_;
  double every_seconds_;
  Clock::time_point started_, last_;
};

}  // namespace tfm::internal
