#include "tfm/kernels/cpu/cache_cpu.h"

#include <cstring>

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void cache_write(char* dst, int64_t dst_capacity, const char* src, int64_t rows, int64_t n,
                 int64_t width, int64_t position) {
  // A beam search's step writes 2 KB a row into lines no core holds, half of each row from the
  // other core's product: shared by rows from 128 KB (a beam-4 step of `base`'s 32 sentences),
  // below that one thread copies faster than a parallel region opens.
  const int64_t bytes = rows * n * width;
#pragma omp parallel for schedule(static) if (bytes >= 4 * kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + (r * dst_capacity + position) * width, src + r * n * width,
                static_cast<size_t>(n * width));
}

void cache_gather(char* dst, int64_t dst_capacity, const char* src, int64_t src_capacity,
                  const int32_t* slots, int64_t slots_stride, const int64_t* rows, int64_t n_rows,
                  int64_t positions, int64_t width) {
  const int64_t src_row = src_capacity * width, dst_row = dst_capacity * width;
  if (slots == nullptr) {
    for (int64_t r = 0; r < n_rows; ++r)
      std::memcpy(dst + r * dst_row, src + rows[r] * src_row,
                  static_cast<size_t>(positions * width));
    return;
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const int32_t* row_slots = slots + rows[r] * slots_stride;
    for (int64_t j = 0; j < positions; ++j)
      std::memcpy(dst + r * dst_row + j * width, src + row_slots[j] * src_row + j * width,
                  static_cast<size_t>(width));
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
