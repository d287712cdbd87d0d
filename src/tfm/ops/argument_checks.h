// Argument checks shared by the op fronts: each failure names the op and the argument.
#pragma once

#include <string_view>

#include "tfm/core/tensor.h"

namespace tfm::ops::detail {

// `t` is defined, lives on the CPU (the only backend with kernels so far) and has dtype `dtype`.
inline void check_input(const Tensor& t, std::string_view op, std::string_view name,
                        DType dtype = DType::f32) {
  TFM_CHECK(t.defined(), "{}: {} is undefined", op, name);
  TFM_CHECK(t.device() == Device::cpu, "{}: {} is on {}, which has no {} kernel yet", op, name,
            device_name(t.device()), op);
  TFM_CHECK(t.dtype() == dtype, "{}: {} must be {}, got {}", op, name, dtype_name(dtype),
            t.describe());
}

}  // namespace tfm::ops::detail
