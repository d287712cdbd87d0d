// How an op front reaches a device's kernel (docs/ARCHITECTURE.md, "Op dispatch"). The front checks
// its arguments, finds the one device of its tensors with op_device, allocates its outputs there
// and calls the kernel through a dispatch macro:
//
//   const Device device = detail::op_device("add", a, b);
//   Tensor out = Tensor::empty(a.shape(), DType::f32, device);
//   TFM_DISPATCH_CUDA("add", device,
//                     cpu::add(a.data<float>(), b.data<float>(), out.data<float>(), n),
//                     cuda::add(a.device_data<float>(), b.device_data<float>(),
//                               out.device_data<float>(), n));
//
// TFM_DISPATCH_CUDA's CUDA body is compiled only in a build with the CUDA backend (TFM_HAVE_CUDA)
// and runs only once ops::use_device made the GPU ready; without the backend the macro is
// TFM_DISPATCH, which has a CPU body only and fails with a one-line error naming the op on any
// other device. The dispatch is one comparison per op call: no table, no virtual call.
#pragma once

#include <string>
#include <string_view>

#include "tfm/core/tensor.h"

namespace tfm::ops::detail {

// The message for an op that has no kernel on `device`: "tfm was built without CUDA; ..." when
// the build has no CUDA backend, else "<op>: no CUDA kernel yet".
std::string no_kernel_message(std::string_view op, Device device, bool built_with_cuda);
[[noreturn]] void no_kernel(std::string_view op, Device device);
// A CUDA build's op on cuda tensors whose device use_device has not made ready (memory that a
// test installed by hand): "<op>: the CUDA device is not initialised (...)".
[[noreturn]] void device_not_ready(std::string_view op, Device device);
bool cuda_ready();
[[noreturn]] void mixed_devices(std::string_view op, Device first, Device other);

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

}  // namespace tfm::ops::detail

// Runs cpu_call on the CPU; any other device: the op has no kernel there.
#define TFM_DISPATCH(op, device, cpu_call)           \
  do {                                               \
    if ((device) == ::tfm::Device::cpu) {            \
      cpu_call;                                      \
    } else {                                         \
      ::tfm::ops::detail::no_kernel((op), (device)); \
    }                                                \
  } while (false)

// Runs cpu_call on the CPU and cuda_call on CUDA (compiled only with the CUDA backend).
#ifdef TFM_HAVE_CUDA
#define TFM_DISPATCH_CUDA(op, device, cpu_call, cuda_call)                                         \
  do {                                                                                             \
    if ((device) == ::tfm::Device::cpu) {                                                          \
      cpu_call;                                                                                    \
    } else {                                                                                       \
      if (!::tfm::ops::detail::cuda_ready()) ::tfm::ops::detail::device_not_ready((op), (device)); \
      cuda_call;                                                                                   \
    }                                                                                              \
  } while (false)
#else
#define TFM_DISPATCH_CUDA(op, device, cpu_call, cuda_call) TFM_DISPATCH(op, device, cpu_call)
#endif
