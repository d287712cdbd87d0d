// Key/value cache copies (cache_cuda.h).
#include <cstdint>

#include "tfm/kernels/cuda/cache_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

// One thread per word of Word bytes of the n_rows * positions positions copied; widths, capacities
// and both base addresses are multiples of sizeof(Word).
template <typename Word>
__global__ void gather_kernel(Word* dst, int64_t dst_capacity, const Word* src,
                              int64_t src_capacity, const int32_t* slots, int64_t slots_stride,
                              const int64_t* rows, int64_t n_rows, int64_t positions,
                              int64_t words) {
  const int64_t total = n_rows * positions * words;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t w = e % words, j = (e / words) % positions, r = e / (words * positions);
    const int64_t row = rows[r];
    const int64_t from = slots != nullptr ? slots[row * slots_stride + j] : row;
    dst[(r * dst_capacity + j) * words + w] = src[(from * src_capacity + j) * words + w];
  }
}

template <typename Word>
void gather(char* dst, int64_t dst_capacity, const char* src, int64_t src_capacity,
            const int32_t* slots, int64_t slots_stride, const int64_t* rows, int64_t n_rows,
            int64_t positions, int64_t width) {
  constexpr int kThreads = 256;
  const int64_t words = width / static_cast<int64_t>(sizeof(Word));
  gather_kernel<Word><<<grid_for(n_rows * positions * words, kThreads), kThreads, 0, stream()>>>(
      reinterpret_cast<Word*>(dst), dst_capacity, reinterpret_cast<const Word*>(src), src_capacity,
      slots, slots_stride, rows, n_rows, positions, words);
  TFM_CUDA_LAUNCHED(gather_kernel);
}

bool aligned(const void* p, int64_t width, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0 && width % static_cast<int64_t>(bytes) == 0;
}

}  // namespace

void cache_write(char* dst, int64_t dst_capacity, const char* src, int64_t rows, int64_t n,
                 int64_t width, int64_t position) {
  if (rows == 0 || n == 0) return;
  // Row r: n * width contiguous bytes, from pitch n * width to pitch dst_capacity * width.
  TFM_CUDA_CHECK(cudaMemcpy2DAsync(dst + position * width,
                                   static_cast<size_t>(dst_capacity * width), src,
                                   static_cast<size_t>(n * width), static_cast<size_t>(n * width),
                                   static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream()));
}

void cache_gather(char* dst, int64_t dst_capacity, const char* src, int64_t src_capacity,
                  const int32_t* slots, int64_t slots_stride, const int64_t* rows, int64_t n_rows,
                  int64_t positions, int64_t width) {
  if (n_rows == 0 || positions == 0 || width == 0) return;
  // The widest word that divides the position size and aligns both buffers.
  if (aligned(dst, width, 16) && aligned(src, width, 16)) {
    gather<uint4>(dst, dst_capacity, src, src_capacity, slots, slots_stride, rows, n_rows,
                  positions, width);
  } else if (aligned(dst, width, 4) && aligned(src, width, 4)) {
    gather<uint32_t>(dst, dst_capacity, src, src_capacity, slots, slots_stride, rows, n_rows,
                     positions, width);
  } else {
    gather<unsigned char>(dst, dst_capacity, src, src_capacity, slots, slots_stride, rows, n_rows,
                          positions, width);
  }
}

}  // namespace tfm::internal::cuda
