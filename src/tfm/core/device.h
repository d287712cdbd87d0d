// Where a tensor's memory lives. CUDA is reserved for the GPU backend.
#pragma once

#include <cstdint>
#include <string_view>

namespace tfm {

enum class Device : uint8_t { cpu, cuda };

constexpr std::string_view device_name(Device device) {
  return device == Device::cpu ? "cpu" : "cuda";
}

}  // namespace tfm
