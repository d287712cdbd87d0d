#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/optimizer_cuda.h"
#include "tfm/kernels/cuda/reduce.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void adam_step_kernel(float* p, float* m, float* v, const float* g, int64_t n,
                                 AdamStep step) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < n;
       j += int64_t{gridDim.x} * blockDim.x) {
    const float gj = g[j];
    const float mj = step.beta1 * m[j] + (1.0f - step.beta1) * gj;
    const float vj = step.beta2 * v[j] + (1.0f - step.beta2) * gj * gj;
    m[j] = mj;
    v[j] = vj;
    p[j] = step.keep * p[j] - step.step_size * mj / (sqrtf(vj) * step.inv_sqrt_bc2 + step.eps);
  }
}

// sum_squares' blocks: each writes its partial sum, and the last block to finish (counted with an
// atomic ticket) adds the partials in block order. The partials and the ticket live in static
// device memory; kernels on the one stream run one after another, so calls never share them.
constexpr int kMaxSumBlocks = 1024;
__device__ double g_partials[kMaxSumBlocks];
__device__ unsigned g_blocks_done = 0;
__device__ double g_sum;  // sum_squares' result, before it is copied to the host

__global__ void sum_squares_kernel(const float* x, int64_t n, double* out, bool accumulate) {
  __shared__ double scratch[32];
  __shared__ bool last;
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double v = x[i];
    s += v * v;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    g_partials[blockIdx.x] = s;
    __threadfence();  // the partial is visible to every block before the ticket is taken
    last = atomicAdd(&g_blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  double total = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) total += __ldcg(&g_partials[b]);
  total = block_sum(total, scratch);
  if (threadIdx.x == 0) {
    *out = accumulate ? *out + total : total;
    g_blocks_done = 0;  // ready for the next call
  }
}

__global__ void scale_kernel(float* x, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= scale;
}

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = value;
}

// As a + (1 - d) (x - a), as on the CPU.
__global__ void moving_average_kernel(float* average, const float* x, int64_t n, float rate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    average[i] += rate * (x[i] - average[i]);
}

}  // namespace

void adam_step(float* p, float* m, float* v, const float* g, int64_t n, const AdamStep& step) {
  if (n <= 0) return;
  adam_step_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(p, m, v, g, n, step);
  TFM_CUDA_LAUNCHED(adam_step_kernel);
}

void sum_squares_async(const float* x, int64_t n, double* device_out, bool accumulate) {
  unsigned blocks = grid_for(n, kThreads);
  if (blocks > kMaxSumBlocks) blocks = kMaxSumBlocks;
  sum_squares_kernel<<<blocks, kThreads, 0, stream()>>>(x, n, device_out, accumulate);
  TFM_CUDA_LAUNCHED(sum_squares_kernel);
}

double sum_squares(const float* x, int64_t n) {
  double* device_sum = nullptr;
  TFM_CUDA_CHECK(cudaGetSymbolAddress(reinterpret_cast<void**>(&device_sum), g_sum));
  sum_squares_async(x, n, device_sum, false);
  double sum = 0;
  TFM_CUDA_CHECK(cudaMemcpyAsync(&sum, device_sum, sizeof(sum), cudaMemcpyDeviceToHost, stream()));
  TFM_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return sum;
}

void scale(float* x, int64_t n, float scale) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(x, n, scale);
  TFM_CUDA_LAUNCHED(scale_kernel);
}

void fill(float* x, int64_t n, float value) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(x, n, value);
  TFM_CUDA_LAUNCHED(fill_kernel);
}

void moving_average(float* average, const float* x, int64_t n, float decay) {
  if (n <= 0) return;
  moving_average_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(average, x, n,
                                                                          1.0f - decay);
  TFM_CUDA_LAUNCHED(moving_average_kernel);
}

}  // namespace tfm::internal::cuda
