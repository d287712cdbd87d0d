// Where a tensor's memory lives. A device's kernels are a table registered by its backend
// (kernels/registry.cc); a new device is a value here and its name in kDeviceNames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tfm::internal {

enum class Device : uint8_t { cpu, cuda };

inline constexpr std::string_view kDeviceNames[] = {"cpu", "cuda"};  // indexed by Device

constexpr std::string_view device_name(Device device) {
  return kDeviceNames[static_cast<size_t>(device)];
}

}  // namespace tfm::internal
