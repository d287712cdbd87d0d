// Key/value cache copies of incremental decoding (nn::KeyValueCache), on [rows, capacity, width]
// buffers of f32 or bf16 elements, moved as bytes (`width` is a position's size in bytes).
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// dst[r, position + j, :] = src[r, j, :] for r < rows, j < n; src: [rows, n, width].
void cache_write(char* dst, int64_t dst_capacity, const char* src, int64_t rows, int64_t n,
                 int64_t width, int64_t position);

// dst[r, j, :] = src[slot(rows[r], j), j, :] for r < n_rows, j < positions, where slot(row, j) =
// slots[row * slots_stride + j], or row itself when slots is null.
void cache_gather(char* dst, int64_t dst_capacity, const char* src, int64_t src_capacity,
                  const int32_t* slots, int64_t slots_stride, const int64_t* rows, int64_t n_rows,
                  int64_t positions, int64_t width);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
