#include "tfm/ops/device.h"

#include "tfm/core/error.h"

#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cuda/runtime_cuda.h"
#endif

namespace tfm::ops {

std::string device_unavailable_reason(Device device) {
  if (device == Device::cpu) return "";
#ifdef TFM_HAVE_CUDA
  return cuda::unavailable_reason();
#else
  return "tfm was built without CUDA (configure with the CUDA toolkit installed, "
         "TFM_ENABLE_CUDA=ON)";
#endif
}

void use_device(Device device) {
  if (device == Device::cpu) return;
#ifdef TFM_HAVE_CUDA
  cuda::initialize();
#else
  fail("{}", device_unavailable_reason(device));
#endif
}

bool device_ready(Device device) {
  if (device == Device::cpu) return true;
#ifdef TFM_HAVE_CUDA
  return cuda::initialized();
#else
  return false;
#endif
}

void synchronize(Device device) {
#ifdef TFM_HAVE_CUDA
  if (device == Device::cuda) cuda::synchronize();
#else
  (void)device;
#endif
}

std::string describe_device(Device device) {
  if (device == Device::cpu) return "cpu";
#ifdef TFM_HAVE_CUDA
  return cuda::describe();
#else
  return "cuda (not built)";
#endif
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda" || name == "gpu") return Device::cuda;
  fail("unknown device '{}' (expected cpu or cuda)", name);
}

}  // namespace tfm::ops
