// Top-k per row (top_k_cuda.h). Each thread keeps the best k of its elements (indices thread,
// thread + blockDim, ... in increasing order, so equal values stay lowest index first) in a sorted
// list, as cpu::TopK does; then k rounds of a block-wide arg-max over the lists' heads pick the
// row's best k in order. The order is (value descending, index ascending), the CPU's.
#include <cmath>
#include <cstdint>

#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/top_k_cuda.h"

namespace tfm::internal::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kNone = 0x7fffffff;  // index of an empty head

// a before b in the output order.
__device__ inline bool better(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

__global__ void top_k_kernel(const float* x, int64_t n, int k, int64_t excluded, float* values,
                             int32_t* indices, int32_t* counts) {
  __shared__ float best_value[kThreads / 32];
  __shared__ int best_index[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float* row = x + r * n;

  // This thread's best k, sorted; the insertion of cpu::TopK.
  float list_value[kMaxTopK];
  int list_index[kMaxTopK];
  int count = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float value = row[j];
    const float threshold = count == k ? list_value[k - 1] : -INFINITY;
    if (!(value > threshold) || j == excluded) continue;  // also drops NaN and -inf
    int at = count < k ? count : k - 1;
    while (at > 0 && list_value[at - 1] < value) {
      list_value[at] = list_value[at - 1];
      list_index[at] = list_index[at - 1];
      --at;
    }
    list_value[at] = value;
    list_index[at] = static_cast<int>(j);
    if (count < k) ++count;
  }

  // k rounds: the best head among the threads is the next output; its thread moves on.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int next = 0, filled = 0;
  for (int round = 0; round < k; ++round) {
    float v = next < count ? list_value[next] : -INFINITY;
    int i = next < count ? list_index[next] : kNone;
    for (int o = 16; o > 0; o /= 2) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, i, o);
      if (better(ov, oi, v, i)) {
        v = ov;
        i = oi;
      }
    }
    if (lane == 0) {
      best_value[warp] = v;
      best_index[warp] = i;
    }
    __syncthreads();
    v = best_value[0];
    i = best_index[0];
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(best_value[w], best_index[w], v, i)) {
        v = best_value[w];
        i = best_index[w];
      }
    __syncthreads();        // best_* are rewritten by the next round
    if (i == kNone) break;  // every list is exhausted (the same for all threads)
    if (next < count && list_index[next] == i) ++next;
    if (threadIdx.x == 0) {
      values[r * k + round] = v;
      indices[r * k + round] = i;
    }
    filled = round + 1;
  }
  if (threadIdx.x == 0) counts[r] = filled;
}

}  // namespace

void top_k_rows(const float* x, int64_t rows, int64_t n, int64_t k, int64_t excluded, float* values,
                int32_t* indices, int32_t* counts) {
  if (rows == 0) return;
  top_k_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(
      x, n, static_cast<int>(k), excluded, values, indices, counts);
  TFM_CUDA_LAUNCHED(top_k_kernel);
}

}  // namespace tfm::internal::cuda
