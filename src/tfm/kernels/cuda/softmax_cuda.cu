#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/reduce.cuh"
#include "tfm/kernels/cuda/softmax_cuda.h"

namespace tfm::internal::cuda {

namespace {

// One block a row; a thread takes the elements j = threadIdx.x + k blockDim.x of each pass, so a
// thread that writes y[j] in one pass is the one that reads it in the next (y may equal x).
int row_threads(int64_t n) {
  const int64_t warps = (n + 127) / 128;  // about four elements a thread
  return static_cast<int>(warps < 1 ? 32 : (warps > 32 ? 1024 : warps * 32));
}

__device__ float row_max(const float* x, int64_t n, float* scratch) {
  float m = -__int_as_float(0x7f800000);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
  return block_max(m, scratch);
}

// y_j = e^{x_j - m} / sum_k e^{x_k - m} with m the row's maximum, so nothing overflows.
__global__ void softmax_kernel(const float* x, float* y, int64_t n) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * n;
  float* yr = y + r * n;
  const float m = row_max(xr, n, scratch);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(xr[j] - m);
    yr[j] = e;
    sum += e;
  }
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] *= inv;
}

// dx_j = y_j (g_j - sum_i g_i y_i) (derived in kernels/cpu/softmax_cpu.cc).
__global__ void softmax_backward_kernel(const float* y, const float* g, float* dx, int64_t n,
                                        bool accumulate) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* yr = y + r * n;
  const float* gr = g + r * n;
  float* dxr = dx + r * n;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += gr[j] * yr[j];
  dot = block_sum(dot, scratch);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = yr[j] * (gr[j] - dot);
    dxr[j] = accumulate ? dxr[j] + v : v;
  }
}

// log softmax(x)_j = x_j - m - log(sum_i e^{x_i - m}) with m = max x.
__global__ void log_softmax_kernel(const float* x, float* y, int64_t n) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * n;
  float* yr = y + r * n;
  const float m = row_max(xr, n, scratch);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += expf(xr[j] - m);
  sum = block_sum(sum, scratch);
  const float log_norm = m + logf(sum);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) yr[j] = xr[j] - log_norm;
}

}  // namespace

void softmax(const float* x, float* y, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  softmax_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, stream()>>>(x, y, n);
  TFM_CUDA_LAUNCHED(softmax_kernel);
}

void softmax_backward(const float* y, const float* g, float* dx, int64_t rows, int64_t n,
                      bool accumulate) {
  if (rows <= 0 || n <= 0) return;
  softmax_backward_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, stream()>>>(y, g, dx, n,
                                                                                        accumulate);
  TFM_CUDA_LAUNCHED(softmax_backward_kernel);
}

void log_softmax(const float* x, float* y, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  log_softmax_kernel<<<static_cast<unsigned>(rows), row_threads(n), 0, stream()>>>(x, y, n);
  TFM_CUDA_LAUNCHED(log_softmax_kernel);
}

}  // namespace tfm::internal::cuda
