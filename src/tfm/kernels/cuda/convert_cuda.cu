#include "tfm/kernels/cuda/bf16_bits.cuh"
#include "tfm/kernels/cuda/convert_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void f32_to_bf16_kernel(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = f32_to_bf16_bits(src[i]);
}

}  // namespace

void f32_to_bf16(const float* src, bf16* dst, int64_t n) {
  if (n <= 0) return;
  f32_to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(
      src, reinterpret_cast<uint16_t*>(dst), n);
  TFM_CUDA_LAUNCHED(f32_to_bf16_kernel);
}

}  // namespace tfm::internal::cuda
