#include <cub/device/device_radix_sort.cuh>

#include "tfm/kernels/cuda/embedding_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

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

// The sort's keys: the id, or `vocab` for an id outside the table (sorted last, then skipped);
// its values: the token positions.
__global__ void sort_input_kernel(const int32_t* ids, int64_t n, int64_t vocab, uint32_t* keys,
                                  int32_t* positions) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t id = ids[i];
    keys[i] = static_cast<uint32_t>(id >= 0 && id < vocab ? id : vocab);
    positions[i] = static_cast<int32_t>(i);
  }
}

// out[i, :] = scale * table[ids[i], :], so d table[v, :] = scale * sum_{i: ids[i] = v} g[i, :].
// Block k starts at sorted position k; the block where a run of one id begins adds that run's
// rows, in token order (the sort is stable), onto the row's old value or 0: one writer per row.
__global__ void embedding_backward_kernel(const uint32_t* keys, const int32_t* positions, int64_t n,
                                          const float* g, int64_t vocab, int64_t d, float scale,
                                          float* dtable) {
  const int64_t first = blockIdx.x;
  const uint32_t key = keys[first];
  if (key >= vocab || (first > 0 && keys[first - 1] == key)) return;
  float* row = dtable + int64_t{key} * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    float sum = row[j];
    for (int64_t k = first; k < n && keys[k] == key; ++k)
      sum += scale * g[int64_t{positions[k]} * d + j];
    row[j] = sum;
  }
}

// Bits of the sort's keys: enough for 0..vocab.
int key_bits(int64_t vocab) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= vocab) ++bits;
  return bits;
}

// The workspace: keys in and out, positions in and out (n each), then the sort's own scratch at a
// 256-byte boundary.
int64_t sort_offset(int64_t n) {
  return (4 * n + 63) / 64 * 64;
}

size_t sort_bytes(int64_t n, int64_t vocab) {
  size_t bytes = 0;
  TFM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
      key_bits(vocab), stream()));
  return bytes;
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

int64_t embedding_backward_workspace(int64_t n, int64_t vocab) {
  if (n <= 0) return 0;
  return sort_offset(n) + static_cast<int64_t>((sort_bytes(n, vocab) + 3) / 4);
}

void embedding_backward(const int32_t* ids, int64_t n, const float* g, int64_t vocab, int64_t d,
                        float scale, float* dtable, bool accumulate, int32_t* workspace) {
  if (d <= 0) return;
  if (!accumulate && vocab > 0) {
    fill_kernel<<<grid_for(vocab * d, kThreads), kThreads, 0, stream()>>>(dtable, vocab * d, 0.0f);
    TFM_CUDA_LAUNCHED(fill_kernel);
  }
  if (n <= 0) return;
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(workspace);
  uint32_t* keys = keys_in + n;
  int32_t* positions_in = workspace + 2 * n;
  int32_t* positions = workspace + 3 * n;
  void* sort_scratch = workspace + sort_offset(n);
  size_t bytes = sort_bytes(n, vocab);
  sort_input_kernel<<<grid_for(n, kThreads), kThreads, 0, stream()>>>(ids, n, vocab, keys_in,
                                                                      positions_in);
  TFM_CUDA_LAUNCHED(sort_input_kernel);
  TFM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch, bytes, keys_in, keys, positions_in,
                                                 positions, static_cast<int>(n), 0, key_bits(vocab),
                                                 stream()));
  const int64_t warps = (d + 31) / 32;
  const int threads = static_cast<int>(warps > 16 ? 512 : warps * 32);
  embedding_backward_kernel<<<static_cast<unsigned>(n), threads, 0, stream()>>>(
      keys, positions, n, g, vocab, d, scale, dtable);
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

}  // namespace tfm::internal::cuda
