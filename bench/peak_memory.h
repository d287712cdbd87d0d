// Peak resident memory of this process (VmHWM), as the benchmarks report it beside PyTorch's
// ru_maxrss, and the resident memory now (VmRSS).
#pragma once

#include <fstream>
#include <string>

inline double status_mb(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(status, line))
    if (line.rfind(prefix, 0) == 0) return std::stod(line.substr(prefix.size())) / 1024.0;
  return 0.0;
}

inline double peak_rss_mb() {
  return status_mb("VmHWM");
}

inline double rss_mb() {
  return status_mb("VmRSS");
}
