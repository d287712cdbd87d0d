// The k largest entries of each row on CUDA (kernels/cpu/top_k_cpu.h's top_k_rows with device
// pointers): one block per row, k up to kMaxTopK.
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

constexpr int64_t kMaxTopK = 64;

// As cpu::top_k_rows: values/indices [rows, k] best first (ties: the lower index), counts[r] <= k
// filled (the rest left as they are); -inf, NaN and index `excluded` never enter. k <= kMaxTopK.
void top_k_rows(const float* x, int64_t rows, int64_t n, int64_t k, int64_t excluded, float* values,
                int32_t* indices, int32_t* counts);

}  // namespace tfm::internal::cuda
