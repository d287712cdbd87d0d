#include "tfm/kernels/cuda/convert_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kThreads = 256;

// cpu::f32_to_bf16_bits: round to nearest even on the bit pattern (add 0x7fff plus the lowest kept
// bit, then truncate); NaNs are made quiet instead of rounded, which could carry a payload into
// the exponent and make an infinity.
__device__ inline uint16_t f32_to_bf16_bits(float value) {
  const uint32_t u = __float_as_uint(value);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

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
