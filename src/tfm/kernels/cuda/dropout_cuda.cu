#include "tfm/kernels/cuda/dropout_cuda.h"
#include "tfm/kernels/cuda/dropout_mask.cuh"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kThreads = 256;

// `scale` is 1 / (1 - p) computed on the host, as the CPU kernel computes it, so that the kept
// values are the same bits on both devices.
__global__ void dropout_kernel(const float* x, float* y, int64_t n, float p, float scale,
                               uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = dropout_keep(seed, static_cast<uint64_t>(i), p) ? x[i] * scale : 0.0f;
}

// y = m * x / (1 - p) with the mask m fixed, so dy/dx = m / (1 - p).
__global__ void dropout_backward_kernel(const float* g, float* dx, int64_t n, float p, float scale,
                                        uint64_t seed, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    // __fmul_rn: a separate rounded product, never fused with the add below (as on the CPU).
    const float v = dropout_keep(seed, static_cast<uint64_t>(i), p) ? __fmul_rn(g[i], scale) : 0.0f;
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

}  // namespace

void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed) {
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - p);
  dropout_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(x, y, n, p, scale, seed);
  TFM_CUDA_LAUNCHED(dropout_kernel);
}

void dropout_backward(const float* g, float* dx, int64_t n, float p, uint64_t seed,
                      bool accumulate) {
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - p);
  dropout_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(g, dx, n, p, scale,
                                                                            seed, accumulate);
  TFM_CUDA_LAUNCHED(dropout_backward_kernel);
}

}  // namespace tfm::internal::cuda
