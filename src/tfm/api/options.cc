// The public option enums (include/tfm/options.h) and their names.
#include "tfm/options.h"

#include <array>
#include <string>
#include <utility>

#include "tfm/core/error.h"

namespace tfm {

using namespace internal;  // the library's layers, which these public calls wrap

namespace {

constexpr std::array<std::pair<Precision, std::string_view>, 5> kPrecisionNames = {{
    {Precision::f32, "f32"},
    {Precision::bf16, "bf16"},
    {Precision::automatic, "auto"},
    {Precision::int8, "int8"},
    {Precision::int8_bf16, "int8-bf16"},
}};

constexpr std::array<std::pair<ComputeDevice, std::string_view>, 3> kDeviceNames = {{
    {ComputeDevice::cpu, "cpu"},
    {ComputeDevice::cuda, "cuda"},
    {ComputeDevice::automatic, "auto"},
}};

}  // namespace

Precision parse_precision(std::string_view name, std::string_view what) {
  for (const auto& [precision, text] : kPrecisionNames)
    if (name == text) return precision;
  fail("{}: '{}' is not a precision (f32, bf16, auto, int8 or int8-bf16)", what, name);
}

std::string_view to_string(Precision precision) {
  for (const auto& [value, text] : kPrecisionNames)
    if (value == precision) return text;
  fail("precision {} is not one of the enum's values", static_cast<int>(precision));
}

ComputeDevice parse_device(std::string_view name) {
  if (name == "gpu") return ComputeDevice::cuda;
  for (const auto& [device, text] : kDeviceNames)
    if (name == text) return device;
  fail("unknown device '{}' (expected cpu, cuda or auto)", name);
}

std::string_view to_string(ComputeDevice device) {
  for (const auto& [value, text] : kDeviceNames)
    if (value == device) return text;
  fail("device {} is not one of the enum's values", static_cast<int>(device));
}

}  // namespace tfm
