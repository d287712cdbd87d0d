#include <cstdint>

#include "tfm/kernels/cuda/bf16_bits.cuh"
#include "tfm/kernels/cuda/elementwise_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

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

// Column sums in two stages, deterministic (no float atomics) and spread over the whole device:
// stage one, block (32, kRowThreads) sums 32 adjacent columns over chunk blockIdx.y of
// kRowsPerChunk rows into partial[chunk, column] (threadIdx.x picks the column, so a warp reads 128
// contiguous bytes of a row; threadIdx.y a residue of the rows, the kRowThreads partial sums then
// added in a fixed tree order through shared memory); stage two adds each column's chunk partials,
// block (32, kChunkThreads): thread (x, y) sums chunks y, y + kChunkThreads, ... of its column in
// double, then the block adds the kChunkThreads values in a fixed tree. A [25024, 512] gradient
// makes 16 x 391 blocks for stage one (the single-stage kernel had 16 blocks, one per 32 columns).
constexpr int kRowsPerChunk = 64;
constexpr int kRowThreads = 8;
constexpr int kChunkThreads = 32;

int64_t chunks_for(int64_t rows) {
  return (rows + kRowsPerChunk - 1) / kRowsPerChunk;
}

__global__ void sum_rows_partials_kernel(const float* src, int64_t rows, int64_t cols,
                                         float* partial) {
  __shared__ float sums[kRowThreads][33];
  const int64_t j = blockIdx.x * int64_t{32} + threadIdx.x;
  const int64_t c = blockIdx.y;
  const int64_t begin = c * kRowsPerChunk;
  const int64_t end = begin + kRowsPerChunk < rows ? begin + kRowsPerChunk : rows;
  float s = 0.0f;
  if (j < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowThreads) s += src[r * cols + j];
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + half][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && j < cols) partial[c * cols + j] = sums[0][threadIdx.x];
}

__global__ void sum_rows_totals_kernel(const float* partial, int64_t chunks, int64_t cols,
                                       float* dst, bool accumulate) {
  __shared__ double sums[kChunkThreads][33];
  const int64_t j = blockIdx.x * int64_t{32} + threadIdx.x;
  double s = 0;
  if (j < cols)
    for (int64_t c = threadIdx.y; c < chunks; c += kChunkThreads) s += partial[c * cols + j];
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  for (int half = kChunkThreads / 2; half > 0; half /= 2) {
    if (threadIdx.y < half) sums[threadIdx.y][threadIdx.x] += sums[threadIdx.y + half][threadIdx.x];
    __syncthreads();
  }
  if (threadIdx.y == 0 && j < cols) {
    const float total = static_cast<float>(sums[0][threadIdx.x]);
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

__device__ inline float relu_grad(float y, float g, float dx, bool accumulate) {
  const float v = y > 0.0f ? g : 0.0f;
  return accumulate ? dx + v : v;
}

// Over n4 groups of four with 16-byte loads and stores (the caller checks the alignment), then
// the n - 4 n4 elements after them one at a time.
__global__ void relu_backward_kernel(const float* y, const float* g, float* dx, int64_t n,
                                     int64_t n4, bool accumulate) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const float4* y4 = reinterpret_cast<const float4*>(y);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  for (int64_t i = first; i < n4; i += stride) {
    const float4 yv = y4[i], gv = g4[i];
    const float4 d = accumulate ? dx4[i] : float4{};
    dx4[i] =
        make_float4(relu_grad(yv.x, gv.x, d.x, accumulate), relu_grad(yv.y, gv.y, d.y, accumulate),
                    relu_grad(yv.z, gv.z, d.z, accumulate), relu_grad(yv.w, gv.w, d.w, accumulate));
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride)
    dx[i] = relu_grad(y[i], g[i], accumulate ? dx[i] : 0.0f, accumulate);
}

// relu_backward_kernel without accumulation, also writing each value's bf16 bits: groups of four
// as 16-byte loads and stores and one 8-byte store of the copies, then the tail.
__global__ void relu_backward_bf16_kernel(const float* y, const float* g, float* dx,
                                          uint16_t* dx_bf16, int64_t n, int64_t n4) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const float4* y4 = reinterpret_cast<const float4*>(y);
  const float4* g4 = reinterpret_cast<const float4*>(g);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  uint2* copy4 = reinterpret_cast<uint2*>(dx_bf16);
  for (int64_t i = first; i < n4; i += stride) {
    const float4 yv = y4[i], gv = g4[i];
    const float4 d =
        make_float4(relu_grad(yv.x, gv.x, 0.0f, false), relu_grad(yv.y, gv.y, 0.0f, false),
                    relu_grad(yv.z, gv.z, 0.0f, false), relu_grad(yv.w, gv.w, 0.0f, false));
    dx4[i] = d;
    copy4[i] = make_uint2(f32_to_bf16_bits(d.x) | (uint32_t{f32_to_bf16_bits(d.y)} << 16),
                          f32_to_bf16_bits(d.z) | (uint32_t{f32_to_bf16_bits(d.w)} << 16));
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) {
    const float v = relu_grad(y[i], g[i], 0.0f, false);
    dx[i] = v;
    dx_bf16[i] = f32_to_bf16_bits(v);
  }
}

// The activations other than relu. GELU's Phi(x) is normcdff(x), accurate in the left tail where
// 1 + erff(x / sqrt 2) cancels to 0 (the CPU's erfc form is accurate there too).
enum class Activation { gelu, swish };

__device__ inline float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

template <Activation kind>
__device__ inline float activation_value(float x) {
  if constexpr (kind == Activation::gelu) return x * normcdff(x);
  return x * sigmoid(x);
}

template <Activation kind>
__device__ inline float activation_slope(float x) {
  if constexpr (kind == Activation::gelu)
    return normcdff(x) + x * 0.39894228040143268f * expf(-0.5f * x * x);
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

template <Activation kind>
__global__ void activation_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = activation_value<kind>(x[i]);
}

template <Activation kind>
__global__ void activation_backward_kernel(const float* x, const float* g, float* dx, int64_t n,
                                           bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float v = g[i] * activation_slope<kind>(x[i]);
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

template <Activation kind>
void activation(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  activation_kernel<kind><<<grid_for(n, kThreads), kThreads, 0, stream()>>>(x, y, n);
  TFM_CUDA_LAUNCHED(activation_kernel);
}

template <Activation kind>
void activation_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  if (n <= 0) return;
  activation_backward_kernel<kind>
      <<<grid_for(n, kThreads), kThreads, 0, stream()>>>(x, g, dx, n, accumulate);
  TFM_CUDA_LAUNCHED(activation_backward_kernel);
}

}  // namespace

void gelu(const float* x, float* y, int64_t n) {
  activation<Activation::gelu>(x, y, n);
}

void gelu_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  activation_backward<Activation::gelu>(x, g, dx, n, accumulate);
}

void swish(const float* x, float* y, int64_t n) {
  activation<Activation::swish>(x, y, n);
}

void swish_backward(const float* x, const float* g, float* dx, int64_t n, bool accumulate) {
  activation_backward<Activation::swish>(x, g, dx, n, accumulate);
}

void write_grad(float* dst, const float* src, int64_t n, bool accumulate, float scale) {
  if (n <= 0) return;
  write_grad_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(dst, src, n, accumulate,
                                                                      scale);
  TFM_CUDA_LAUNCHED(write_grad_kernel);
}

int64_t sum_rows_workspace(int64_t rows, int64_t cols) {
  return chunks_for(rows) * cols;
}

void sum_rows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate,
              float* workspace) {
  if (cols <= 0) return;
  const unsigned column_blocks = static_cast<unsigned>((cols + 31) / 32);
  const int64_t chunks = chunks_for(rows);
  if (chunks > 0) {
    sum_rows_partials_kernel<<<dim3(column_blocks, static_cast<unsigned>(chunks)),
                               dim3(32, kRowThreads), 0, stream()>>>(src, rows, cols, workspace);
    TFM_CUDA_LAUNCHED(sum_rows_partials_kernel);
  }
  sum_rows_totals_kernel<<<column_blocks, dim3(32, kChunkThreads), 0, stream()>>>(
      workspace, chunks, cols, dst, accumulate);
  TFM_CUDA_LAUNCHED(sum_rows_totals_kernel);
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
  // Whole 16-byte groups when all three arrays start on a 16-byte boundary (the allocator's do).
  const bool aligned = ((reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(g) |
                         reinterpret_cast<uintptr_t>(dx)) &
                        15) == 0;
  const int64_t n4 = aligned ? n / 4 : 0;
  relu_backward_kernel<<<grid_for(n4 > 0 ? n4 : n, kThreads), kThreads, 0, stream()>>>(
      y, g, dx, n, n4, accumulate);
  TFM_CUDA_LAUNCHED(relu_backward_kernel);
}

void relu_backward_bf16(const float* y, const float* g, float* dx, bf16* dx_bf16, int64_t n) {
  if (n <= 0) return;
  // Groups of four when the f32 arrays start on 16 bytes and the copy on 8 (the allocator's do).
  const bool aligned = ((reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(g) |
                         reinterpret_cast<uintptr_t>(dx)) &
                        15) == 0 &&
                       (reinterpret_cast<uintptr_t>(dx_bf16) & 7) == 0;
  const int64_t n4 = aligned ? n / 4 : 0;
  relu_backward_bf16_kernel<<<grid_for(n4 > 0 ? n4 : n, kThreads), kThreads, 0, stream()>>>(
      y, g, dx, reinterpret_cast<uint16_t*>(dx_bf16), n, n4);
  TFM_CUDA_LAUNCHED(relu_backward_bf16_kernel);
}

}  // namespace tfm::internal::cuda
