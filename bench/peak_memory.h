// Peak resident memory of this process (VmHWM), as the benchmarks report it beside PyTorch's
// ru_maxrss.
#pragma once

#include <fstream>
#include <string>

inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0.0;
}
