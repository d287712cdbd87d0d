// One warp a row of [B, h, Tq, Tk] (rows of the model are 32 to a few hundred keys), eight rows a
// block; a lane takes keys j = lane + 32 i, so a lane rereads what it wrote in an earlier pass.
#include "tfm/kernels/cuda/attention_dropout.cuh"
#include "tfm/kernels/cuda/attention_softmax_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/reduce.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kRowsPerBlock = 8;

// Row r (batch r / (h*Tq), query r % Tq) sees keys [0, n):
// kernels::AttentionMaskSpec::visible_keys.
__device__ inline int64_t visible_keys(const kernels::AttentionDims& d,
                                       const kernels::AttentionMaskSpec& mask, int64_t r) {
  const int64_t b = r / (d.heads * d.tq), t = r % d.tq;
  int64_t n = mask.key_lengths ? mask.key_lengths[b] : d.tk;
  if (mask.causal && t + mask.query_offset + 1 < n) n = t + mask.query_offset + 1;
  return n;
}

__device__ inline int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
}

// P_j = e^{S_j - m} / sum_{i < n} e^{S_i - m} for j < n with m the row's maximum over the visible
// keys (nothing overflows), P_j = 0 for j >= n; D_j = P_j keep_j / (1 - p).
__global__ void softmax_kernel(kernels::AttentionDims d, kernels::AttentionMaskSpec mask,
                               kernels::AttentionDropout drop, float* probs, float* dropped) {
  const int64_t r = warp_row();
  if (r >= d.batch * d.heads * d.tq) return;  // the whole warp
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = visible_keys(d, mask, r);
  float* p = probs + r * d.tk;
  float m = -__int_as_float(0x7f800000);
  for (int64_t j = lane; j < n; j += 32) m = fmaxf(m, p[j]);
  m = warp_max(m);
  float sum = 0.0f;
  for (int64_t j = lane; j < n; j += 32) {
    const float e = expf(p[j] - m);
    p[j] = e;
    sum += e;
  }
  const float inv = 1.0f / warp_sum(sum);
  const float scale = attention_keep_scale(drop);
  for (int64_t j = lane; j < d.tk; j += 32) {
    const float x = j < n ? p[j] * inv : 0.0f;
    p[j] = x;
    if (dropped != nullptr) {
      const uint64_t index = static_cast<uint64_t>(r * d.tk + j);
      dropped[r * d.tk + j] = attention_dropout_keep(drop.seed, index, drop.p) ? x * scale : 0.0f;
    }
  }
}

__global__ void dropout_kernel(int64_t count, kernels::AttentionDropout drop, const float* probs,
                               float* dropped) {
  const float scale = attention_keep_scale(drop);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step)
    dropped[i] = attention_dropout_keep(drop.seed, static_cast<uint64_t>(i), drop.p)
                     ? probs[i] * scale
                     : 0.0f;
}

// dP_j = dD_j keep_j / (1 - p), then dS_j = alpha P_j (dP_j - sum_{i < n} dP_i P_i) for j < n, 0
// beyond (derived in kernels/cpu/attention_cpu.cc). The first pass leaves dP in grad.
__global__ void softmax_backward_kernel(kernels::AttentionDims d, kernels::AttentionMaskSpec mask,
                                        kernels::AttentionDropout drop, float alpha,
                                        const float* probs, float* grad) {
  const int64_t r = warp_row();
  if (r >= d.batch * d.heads * d.tq) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t n = visible_keys(d, mask, r);
  const float* p = probs + r * d.tk;
  float* g = grad + r * d.tk;
  const float scale = attention_keep_scale(drop);
  float dot = 0.0f;
  for (int64_t j = lane; j < n; j += 32) {
    float dp = g[j];
    if (drop.p > 0.0f) {
      const uint64_t index = static_cast<uint64_t>(r * d.tk + j);
      dp = attention_dropout_keep(drop.seed, index, drop.p) ? dp * scale : 0.0f;
      g[j] = dp;
    }
    dot += dp * p[j];
  }
  dot = warp_sum(dot);
  for (int64_t j = lane; j < d.tk; j += 32) g[j] = j < n ? alpha * p[j] * (g[j] - dot) : 0.0f;
}

unsigned row_blocks(const kernels::AttentionDims& dims) {
  const int64_t rows = dims.batch * dims.heads * dims.tq;
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void attention_softmax(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                       const kernels::AttentionDropout& dropout, float* probs, float* dropped) {
  if (dims.prob_count() == 0) return;
  softmax_kernel<<<row_blocks(dims), 32 * kRowsPerBlock, 0, stream()>>>(dims, mask, dropout, probs,
                                                                        dropped);
  TFM_CUDA_LAUNCHED(softmax_kernel);
}

void attention_dropout(const kernels::AttentionDims& dims, const kernels::AttentionDropout& dropout,
                       const float* probs, float* dropped) {
  const int64_t count = dims.prob_count();
  if (count == 0) return;
  constexpr int kThreads = 256;
  dropout_kernel<<<grid_for(count, kThreads), kThreads, 0, stream()>>>(count, dropout, probs,
                                                                       dropped);
  TFM_CUDA_LAUNCHED(dropout_kernel);
}

void attention_softmax_backward(const kernels::AttentionDims& dims,
                                const kernels::AttentionMaskSpec& mask,
                                const kernels::AttentionDropout& dropout, float alpha,
                                const float* probs, float* grad) {
  if (dims.prob_count() == 0) return;
  softmax_backward_kernel<<<row_blocks(dims), 32 * kRowsPerBlock, 0, stream()>>>(
      dims, mask, dropout, alpha, probs, grad);
  TFM_CUDA_LAUNCHED(softmax_backward_kernel);
}

}  // namespace tfm::internal::cuda
