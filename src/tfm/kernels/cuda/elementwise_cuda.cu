#include "tfm/kernels/cuda/elementwise_cuda.h"

#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void write_grad_kernel(float* dst, const float* src, int64_t n, bool accumulate,
                                  float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = scale * src[i];
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

// Block (32, kRowThreads): threadIdx.x picks one of 32 adjacent columns (a warp reads 128
// contiguous bytes of a row), threadIdx.y a residue of the rows; the kRowThreads partial sums of a
// column are then added in a fixed tree order through shared memory.
constexpr int kRowThreads = 16;

__global__ void sum_rows_kernel(const float* src, int64_t rows, int64_t cols, float* dst,
                                bool accumulate) {
  __shared__ float partial[kRowThreads][33];
  const int64_t j = blockIdx.x * int64_t{32} + threadIdx.x;
  float s = 0.0f;
  if (j < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kRowThreads) s += src[r * cols + j];
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (threadIdx.y < half)
      partial[threadIdx.y][threadIdx.x] += partial[threadIdx.y + half][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && j < cols) {
    const float total = partial[0][threadIdx.x];
    dst[j] = accumulate ? dst[j] + total : total;
  }
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;  // NaN gives 0, as on the CPU
}

__global__ void relu_backward_kernel(const float* y, const float* g, float* dx, int64_t n,
                                     bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = y[i] > 0.0f ? g[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

}  // namespace

void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale) {
  if (n <= 0) return;
  write_grad_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(dst, src, n, accumulate,
                                                                      scale);
  TFM_CUDA_LAUNCHED(write_grad_kernel);
}

void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate) {
  if (cols <= 0) return;
  const unsigned blocks = static_cast<unsigned>((cols + 31) / 32);
  sum_rows_kernel<<<blocks, dim3(32, kRowThreads), 0, stream()>>>(src, rows, cols, dst, accumulate);
  TFM_CUDA_LAUNCHED(sum_rows_kernel);
}

void add(const float* a, const float* b, float* out, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(a, b, out, n);
  TFM_CUDA_LAUNCHED(add_kernel);
}

void relu(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  relu_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(x, y, n);
  TFM_CUDA_LAUNCHED(relu_kernel);
}

void relu_backward(const float* y, const float* g, float* dx, int64_t n, bool accumulate) {
  if (n <= 0) return;
  relu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(y, g, dx, n, accumulate);
  TFM_CUDA_LAUNCHED(relu_backward_kernel);
}

}  // namespace tfm::cuda
