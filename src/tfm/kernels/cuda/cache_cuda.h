// Key/value cache copies of incremental decoding on CUDA (kernels/cpu/cache_cpu.h with device
// pointers; the op copies the host's row list and a host slot table to the device first).
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

// As cpu::cache_write: dst[r, position + j, :] = src[r, j, :] (one strided copy on the stream).
void cache_write(char* dst, int64_t dst_capacity, const char* src, int64_t rows, int64_t n,
                 int64_t width, int64_t position);

// As cpu::cache_gather: dst[r, j, :] = src[slot(rows[r], j), j, :]; rows and slots on the device.
void cache_gather(char* dst, int64_t dst_capacity, const char* src, int64_t src_capacity,
                  const int32_t* slots, int64_t slots_stride, const int64_t* rows, int64_t n_rows,
                  int64_t positions, int64_t width);

}  // namespace tfm::internal::cuda
