// How an op front reaches a device's kernel (docs/ARCHITECTURE.md, "Op dispatch"). The front checks
// its arguments, finds the one device of its tensors with op_device, allocates its outputs there
// and calls the kernel from that device's table (kernels/kernel_table.h), naming it and its
// arguments once, with the tensors' device addresses:
//
//   const Device device = detail::op_device("add", a, b);
//   Tensor out = Tensor::empty(a.shape(), DType::f32, device);
//   detail::kernel("add", device, &KernelTable::add)(a.device_data<float>(),
//                                                    b.device_data<float>(),
//                                                    out.device_data<float>(), n);
//
// A device with no backend in this build, a device not made ready (ops::use_device), and a null
// entry are one-line errors naming the op. The cost is a table lookup and one indirect call.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "tfm/core/tensor.h"
#include "tfm/kernels/kernel_table.h"

namespace tfm::internal::ops::detail {

using kernels::KernelTable;

// The message for an op that has no kernel on `device`: "tfm was built without CUDA; ..." when
// the build has no backend for the device, else "<op>: no CUDA kernel yet".
std::string no_kernel_message(std::string_view op, Device device, bool backend_built);
[[noreturn]] void no_kernel(std::string_view op, Device device);
// An op on tensors of a device that use_device has not made ready (memory that a test installed
// by hand): "<op>: the cuda device is not initialised (...)".
[[noreturn]] void device_not_ready(std::string_view op, Device device);
[[noreturn]] void mixed_devices(std::string_view op, Device first, Device other);

// The kernels of `device`, ready to run; a one-line error naming the op when the build has no
// backend for it or it is not ready.
const KernelTable& kernels_for(std::string_view op, Device device);

// A kernel of that table; a one-line error when the backend has none.
template <typename Fn>
Fn entry(std::string_view op, Device device, Fn fn) {
  if (fn == nullptr) no_kernel(op, device);
  return fn;
}

// The kernel `member` of `device`'s table (&KernelTable::softmax), checked as above.
template <typename Fn>
Fn kernel(std::string_view op, Device device, Fn KernelTable::*member) {
  return entry(op, device, kernels_for(op, device).*member);
}

inline Device device_of(std::string_view op, Device device, const Tensor& t) {
  if (t.defined() && t.device() != device) mixed_devices(op, device, t.device());
  return device;
}

// The device every defined tensor among `first` and `rest` lives on; a one-line error naming the
// op and the devices when they differ. Undefined tensors (an absent bias) are skipped.
template <typename... Rest>
Device op_device(std::string_view op, const Tensor& first, const Rest&... rest) {
  const Device device = first.device();
  (device_of(op, device, rest), ...);
  return device;
}

// t's device address, or null for an undefined tensor (an absent scratch or bias).
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.device_data<T>() : nullptr;
}

// A scratch of `count` elements of `dtype` on `device`, undefined when count is 0 (a workspace
// entry of kernels/kernel_table.h; a null entry wants none).
template <typename... Args>
Tensor workspace(int64_t (*size)(Args...), DType dtype, Device device,
                 std::type_identity_t<Args>... args) {
  const int64_t count = size != nullptr ? size(args...) : 0;
  return count > 0 ? Tensor::empty({count}, dtype, device) : Tensor();
}

}  // namespace tfm::internal::ops::detail
