// Whole-number helpers shared by the kernels and the planners: rounding a count up to whole blocks.
#pragma once

#include <cstdint>

namespace tfm::internal {

// ceil(a / b) for a >= 0 and b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The least multiple of `multiple` (> 0) that is at least `value` (>= 0).
constexpr int64_t round_up(int64_t value, int64_t multiple) {
  return ceil_div(value, multiple) * multiple;
}

}  // namespace tfm::internal
