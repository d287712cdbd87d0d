// Argument checks shared by the op fronts: each failure names the op and the argument.
#pragma once

#include <string_view>

#include "tfm/core/tensor.h"

namespace tfm::internal::ops::detail {

// `t` is defined and has dtype `dtype` (its device is checked by the dispatch: ops/dispatch.h).
inline void check_input(const Tensor& t, std::string_view op, std::string_view name,
                        DType dtype = DType::f32) {
  TFM_CHECK(t.defined(), "{}: {} is undefined", op, name);
  TFM_CHECK(t.dtype() == dtype, "{}: {} must be {}, got {}", op, name, dtype_name(dtype),
            t.describe());
}

}  // namespace tfm::internal::ops::detail
