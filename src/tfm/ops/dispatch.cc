#include "tfm/ops/dispatch.h"

#include <fmt/format.h>

#include "tfm/ops/device.h"

namespace tfm::ops::detail {

std::string no_kernel_message(std::string_view op, Device device, bool built_with_cuda) {
  if (device == Device::cuda && !built_with_cuda)
    return fmt::format("tfm was built without CUDA; {} cannot run on cuda tensors", op);
  return fmt::format("{}: no {} kernel yet (its tensors are on {})", op,
                     device == Device::cuda ? "CUDA" : device_name(device), device_name(device));
}

void no_kernel(std::string_view op, Device device) {
#ifdef TFM_HAVE_CUDA
  constexpr bool kBuiltWithCuda = true;
#else
  constexpr bool kBuiltWithCuda = false;
#endif
  throw Error(no_kernel_message(op, device, kBuiltWithCuda));
}

void device_not_ready(std::string_view op, Device device) {
  fail("{}: the {} device is not initialised (ops::use_device makes it ready)", op,
       device_name(device));
}

bool cuda_ready() {
  return device_ready(Device::cuda);
}

void mixed_devices(std::string_view op, Device first, Device other) {
  fail("{}: tensors on different devices ({} and {}); move them to one with Tensor::to", op,
       device_name(first), device_name(other));
}

}  // namespace tfm::ops::detail
