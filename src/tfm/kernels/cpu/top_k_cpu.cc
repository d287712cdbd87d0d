#include "tfm/kernels/cpu/top_k_cpu.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void top_k_rows(const float* x, int64_t rows, int64_t n, int64_t k, int64_t excluded, float* values,
                int32_t* indices, int32_t* counts) {
#pragma omp parallel for schedule(static) if (rows * n >= (int64_t{1} << 15))
  for (int64_t r = 0; r < rows; ++r) {
    TopK top{values + r * k, indices + r * k, static_cast<int32_t>(k), 0};
    top.scan(x + r * n, n, 0, excluded);
    counts[r] = top.count;
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
