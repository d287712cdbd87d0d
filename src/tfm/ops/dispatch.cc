#include "tfm/ops/dispatch.h"

#include <fmt/format.h>

#include "tfm/ops/device.h"

namespace tfm::internal::ops::detail {

std::string no_kernel_message(std::string_view op, Device device, bool backend_built) {
  if (!backend_built)
    return fmt::format("tfm was built without {}; {} cannot run on {} tensors",
                       kernels::backend_name(device), op, device_name(device));
  return fmt::format("{}: no {} kernel yet (its tensors are on {})", op,
                     kernels::backend_name(device), device_name(device));
}

void no_kernel(std::string_view op, Device device) {
  throw Error(no_kernel_message(op, device, kernels::registered_kernels(device) != nullptr));
}

void device_not_ready(std::string_view op, Device device) {
  fail("{}: the {} device is not initialised (ops::use_device makes it ready)", op,
       device_name(device));
}

void mixed_devices(std::string_view op, Device first, Device other) {
  fail("{}: tensors on different devices ({} and {}); move them to one with Tensor::to", op,
       device_name(first), device_name(other));
}

const KernelTable& kernels_for(std::string_view op, Device device) {
  const KernelTable* table = kernels::registered_kernels(device);
  if (table == nullptr) no_kernel(op, device);
  if (table->initialized != nullptr && !table->initialized()) device_not_ready(op, device);
  return *table;
}

}  // namespace tfm::internal::ops::detail
