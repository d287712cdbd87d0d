#include "tfm/ops/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/kernels/kernel_table.h"

namespace tfm::internal::ops {

using kernels::registered_kernels;

// A device's runtime is its backend's (kernels/kernel_table.h): null entries have nothing to do
// (the CPU); a device without a backend in this build says so.
std::string device_unavailable_reason(Device device) {
  const kernels::KernelTable* backend = registered_kernels(device);
  if (backend == nullptr) return std::string(kernels::not_built_reason(device));
  return backend->unavailable_reason ? backend->unavailable_reason() : "";
}

void use_device(Device device) {
  const kernels::KernelTable* backend = registered_kernels(device);
  if (backend == nullptr) fail("{}", device_unavailable_reason(device));
  if (backend->initialize) backend->initialize();
}

bool device_ready(Device device) {
  const kernels::KernelTable* backend = registered_kernels(device);
  if (backend == nullptr) return false;
  return backend->initialized ? backend->initialized() : true;
}

void synchronize(Device device) {
  const kernels::KernelTable* backend = registered_kernels(device);
  if (backend != nullptr && backend->synchronize) backend->synchronize();
}

void* device_queue(Device device) {
  const kernels::KernelTable* backend = registered_kernels(device);
  return backend != nullptr && backend->queue ? backend->queue() : nullptr;
}

std::string describe_device(Device device) {
  const kernels::KernelTable* backend = registered_kernels(device);
  if (backend == nullptr) return fmt::format("{} (not built)", device_name(device));
  return backend->describe ? backend->describe() : std::string(device_name(device));
}

namespace {

// The value of a "Key:   123 kB" line of /proc/meminfo, in bytes; -1 when absent.
int64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key + ":")) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t value = -1;
    std::string unit;
    fields >> value >> unit;
    if (value < 0) return -1;
    return unit == "kB" ? value * 1024 : value;
  }
  return -1;
}

// A number in a cgroup file; -1 when the file is missing or says "max" (no limit).
int64_t cgroup_number(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1;
  try {
    return static_cast<int64_t>(std::stoull(text));
  } catch (const std::exception&) {
    return -1;
  }
}

// What is left of this process's cgroup memory limit (v2, else v1); -1 without a limit. A v1
// "no limit" is a huge number near 2^63.
int64_t cgroup_memory_left() {
  const std::pair<const char*, const char*> files[] = {
      {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes",
       "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit_file, usage_file] : files) {
    const int64_t limit = cgroup_number(limit_file);
    if (limit < 0 || limit >= (int64_t{1} << 60)) continue;
    const int64_t usage = cgroup_number(usage_file);
    if (usage < 0) continue;
    return std::max<int64_t>(0, limit - usage);
  }
  return -1;
}

}  // namespace

MemoryAvailable memory_available(Device device) {
  MemoryAvailable result;
  const kernels::KernelTable* backend = registered_kernels(device);
  if (backend == nullptr) fail("{}", device_unavailable_reason(device));
  if (backend->memory_info) {  // a device with memory of its own
    use_device(device);
    size_t free_bytes = 0, total_bytes = 0;
    backend->memory_info(&free_bytes, &total_bytes);
    result.bytes = static_cast<int64_t>(free_bytes);
    result.source = fmt::format("{}: free of {:.1f} GiB", device_name(device),
                                static_cast<double>(total_bytes) / (1024.0 * 1024 * 1024));
    return result;
  }
  result.bytes = meminfo_bytes("MemAvailable");
  TFM_CHECK(result.bytes >= 0, "cannot read MemAvailable from /proc/meminfo");
  result.source = "cpu: MemAvailable";
  const int64_t cgroup_left = cgroup_memory_left();
  if (cgroup_left >= 0 && cgroup_left < result.bytes) {
    result.bytes = cgroup_left;
    result.source = "cpu: cgroup memory limit less usage";
  }
  return result;
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda" || name == "gpu") return Device::cuda;
  // A recipe that runs as written wherever it is: the GPU when this build and machine have one.
  if (name == "auto")
    return device_unavailable_reason(Device::cuda).empty() ? Device::cuda : Device::cpu;
  fail("unknown device '{}' (expected cpu, cuda or auto)", name);
}

}  // namespace tfm::internal::ops
