#include "tfm/kernels/cuda/embedding_cuda.h"

#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void embedding_kernel(const int32_t* ids, int64_t n, const float* table, int64_t vocab,
                                 int64_t d, float scale, float* out) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n * d;
       k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t id = ids[k / d];
    out[k] = id >= 0 && id < vocab ? scale * table[id * d + k % d] : __int_as_float(0x7fc00000);
  }
}

__global__ void fill_kernel(float* x, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] = value;
}

// out[i, :] = scale * table[ids[i], :], so d table[v, :] = scale * sum_{i: ids[i] = v} g[i, :].
// Thread j owns column j of every row, so no two threads write one element.
__global__ void embedding_backward_kernel(const int32_t* ids, int64_t n, const float* g,
                                          int64_t vocab, int64_t d, float scale, float* dtable) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j >= d) return;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    if (id >= 0 && id < vocab) dtable[id * d + j] += scale * g[i * d + j];
  }
}

__global__ void add_positions_kernel(const float* x, const float* table, int64_t steps, int64_t d,
                                     int64_t offset, int64_t total, float* out) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < total;
       k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = k / d % steps;
    out[k] = x[k] + table[(offset + t) * d + k % d];
  }
}

// out[b, t, :] = x[b, t, :] + table[offset + t, :], so d table[offset + t, :] = sum_b g[b, t, :]
// (summed in batch order, as on the CPU); rows outside [offset, offset + steps) get nothing.
__global__ void add_positions_backward_table_kernel(const float* g, int64_t batch, int64_t steps,
                                                    int64_t d, int64_t offset, int64_t table_rows,
                                                    float* dtable, bool accumulate) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < table_rows * d;
       k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = k / d - offset, j = k % d;
    if (t < 0 || t >= steps) {
      if (!accumulate) dtable[k] = 0.0f;
      continue;
    }
    float sum = accumulate ? dtable[k] : 0.0f;
    for (int64_t b = 0; b < batch; ++b) sum += g[(b * steps + t) * d + j];
    dtable[k] = sum;
  }
}

}  // namespace

void embedding(const int32_t* ids, int64_t n, const float* table, int64_t vocab, int64_t d,
               float scale, float* out) {
  if (n <= 0 || d <= 0) return;
  embedding_kernel<<<grid_for(n * d, kThreads), kThreads, 0, stream()>>>(ids, n, table, vocab, d,
                                                                         scale, out);
  TFM_CUDA_LAUNCHED(embedding_kernel);
}

void embedding_backward(const int32_t* ids, int64_t n, const float* g, int64_t vocab, int64_t d,
                        float scale, float* dtable, bool accumulate) {
  if (d <= 0) return;
  if (!accumulate && vocab > 0) {
    fill_kernel<<<grid_for(vocab * d, kThreads), kThreads, 0, stream()>>>(dtable, vocab * d, 0.0f);
    TFM_CUDA_LAUNCHED(fill_kernel);
  }
  if (n <= 0) return;
  constexpr int kColumnThreads = 64;
  embedding_backward_kernel<<<static_cast<unsigned>((d + kColumnThreads - 1) / kColumnThreads),
                              kColumnThreads, 0, stream()>>>(ids, n, g, vocab, d, scale, dtable);
  TFM_CUDA_LAUNCHED(embedding_backward_kernel);
}

void add_positions(const float* x, const float* table, int64_t batch, int64_t steps, int64_t d,
                   int64_t offset, float* out) {
  const int64_t total = batch * steps * d;
  if (total <= 0) return;
  add_positions_kernel<<<grid_for(total, kThreads), kThreads, 0, stream()>>>(x, table, steps, d,
                                                                             offset, total, out);
  TFM_CUDA_LAUNCHED(add_positions_kernel);
}

void add_positions_backward_table(const float* g, int64_t batch, int64_t steps, int64_t d,
                                  int64_t offset, int64_t table_rows, float* dtable,
                                  bool accumulate) {
  if (table_rows * d <= 0) return;
  add_positions_backward_table_kernel<<<grid_for(table_rows * d, kThreads), kThreads, 0,
                                        stream()>>>(g, batch, steps, d, offset, table_rows, dtable,
                                                    accumulate);
  TFM_CUDA_LAUNCHED(add_positions_backward_table_kernel);
}

}  // namespace tfm::cuda
