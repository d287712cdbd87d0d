// Label-smoothed cross-entropy (cross_entropy_cuda.h): one block per row. The formulas are those of
// kernels/cpu/cross_entropy_cpu.cc: with lse = log sum_j e^{z_j} and q = (1 - eps) onehot(y) +
// eps/V,
//   loss_row = (1 - eps) (lse - z_y) + eps (lse - mean_j z_j),  nll_row = lse - z_y,
//   d loss_row / d z_j = p_j - q_j.
#include <cmath>
#include <cstdint>

#include "tfm/kernels/cuda/cross_entropy_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::cuda {

namespace {

constexpr int kThreads = 256;

// The block's reduction of x with op (every thread gets the result). `scratch` holds 32 values.
template <typename T, typename Op>
__device__ T block_reduce(T x, Op op, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int o = 16; o > 0; o /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < warps; ++w) x = op(x, scratch[w]);
  return x;
}

struct Max {
  __device__ float operator()(float a, float b) const { return a > b ? a : b; }
};
struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

__device__ inline bool counted(int32_t y, int32_t ignore_index, int64_t vocab) {
  return y != ignore_index && y >= 0 && y < vocab;
}

struct RowLoss {
  float lse, loss, nll;
};

// The row's loss terms (cpu row_loss), computed by the whole block.
__device__ RowLoss row_loss(const float* z, int64_t vocab, int32_t y, double eps) {
  __shared__ float scratch[32];
  float max = -INFINITY, sum_z = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    max = z[j] > max ? z[j] : max;
    sum_z += z[j];
  }
  max = block_reduce(max, Max{}, scratch);
  sum_z = block_reduce(sum_z, Sum{}, scratch);
  float sum_exp = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum_exp += expf(z[j] - max);
  sum_exp = block_reduce(sum_exp, Sum{}, scratch);
  const double lse = static_cast<double>(max) + log(static_cast<double>(sum_exp));
  const double nll = lse - z[y];
  const double smooth = lse - static_cast<double>(sum_z) / static_cast<double>(vocab);
  return {static_cast<float>(lse), static_cast<float>((1.0 - eps) * nll + eps * smooth),
          static_cast<float>(nll)};
}

// cpu::f32_to_bf16_bits: round to nearest even, NaN stays (quiet) NaN.
__device__ inline uint16_t f32_to_bf16_bits(float value) {
  const uint32_t u = __float_as_uint(value);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

__global__ void rows_kernel(const float* logits, const int32_t* targets, int64_t vocab, float eps,
                            int32_t ignore_index, float* row_loss_nll, float* lse) {
  const int64_t r = blockIdx.x;
  const int32_t y = targets[r];
  if (!counted(y, ignore_index, vocab)) {
    if (threadIdx.x == 0) row_loss_nll[2 * r] = row_loss_nll[2 * r + 1] = 0.0f;
    return;
  }
  const RowLoss row = row_loss(logits + r * vocab, vocab, y, eps);
  if (threadIdx.x == 0) {
    if (lse != nullptr) lse[r] = row.lse;
    row_loss_nll[2 * r] = row.loss;
    row_loss_nll[2 * r + 1] = row.nll;
  }
}

// dz (+)= scale * (e^{z - lse} - eps / V), and - scale * (1 - eps) at the target, by the block.
// dz may be z itself: each element is read and written by one thread.
__device__ void row_grad(const float* z, int32_t y, float lse, int64_t vocab, float eps,
                         float scale, float* dz, bool accumulate, uint16_t* dz_bf16) {
  const float smooth = eps / static_cast<float>(vocab);
  const float on_target = 1.0f - eps;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    float g = scale * (expf(z[j] - lse) - smooth);
    if (accumulate) g = dz[j] + g;
    if (j == y) g -= scale * on_target;
    dz[j] = g;
    if (dz_bf16 != nullptr) dz_bf16[j] = f32_to_bf16_bits(g);
  }
}

__global__ void rows_with_grad_kernel(float* logits, const int32_t* targets, int64_t vocab,
                                      float eps, int32_t ignore_index, float scale,
                                      float* row_loss_nll, uint16_t* dlogits_bf16) {
  const int64_t r = blockIdx.x;
  const int32_t y = targets[r];
  float* z = logits + r * vocab;
  uint16_t* z_bf16 = dlogits_bf16 != nullptr ? dlogits_bf16 + r * vocab : nullptr;
  if (!counted(y, ignore_index, vocab)) {
    if (threadIdx.x == 0) row_loss_nll[2 * r] = row_loss_nll[2 * r + 1] = 0.0f;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      z[j] = 0.0f;
      if (z_bf16 != nullptr) z_bf16[j] = 0;
    }
    return;
  }
  const RowLoss row = row_loss(z, vocab, y, eps);  // ends with a barrier: z is read everywhere
  if (threadIdx.x == 0) {
    row_loss_nll[2 * r] = row.loss;
    row_loss_nll[2 * r + 1] = row.nll;
  }
  row_grad(z, y, row.lse, vocab, eps, scale, z, false, z_bf16);
}

__global__ void backward_kernel(const float* logits, const int32_t* targets, const float* lse,
                                int64_t vocab, float eps, int32_t ignore_index, float scale,
                                const float* scale_by, float* dlogits, bool accumulate) {
  const int64_t r = blockIdx.x;
  const int32_t y = targets[r];
  float* dz = dlogits + r * vocab;
  if (!counted(y, ignore_index, vocab)) {
    if (!accumulate)
      for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) dz[j] = 0.0f;
    return;
  }
  if (scale_by != nullptr) scale *= *scale_by;
  row_grad(logits + r * vocab, y, lse[r], vocab, eps, scale, dz, accumulate, nullptr);
}

// sums = (loss, nll, tokens, bad targets) over the rows, in double; one block, each thread
// visiting a fixed set of rows, so the result does not vary from run to run.
__global__ void sums_kernel(const int32_t* targets, const float* row_loss_nll, int64_t rows,
                            int64_t vocab, int32_t ignore_index, double* sums) {
  __shared__ double scratch[32];
  double loss = 0, nll = 0, tokens = 0, bad = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int32_t y = targets[r];
    if (y == ignore_index) continue;
    if (!counted(y, ignore_index, vocab)) {
      bad += 1;
      continue;
    }
    loss += row_loss_nll[2 * r];
    nll += row_loss_nll[2 * r + 1];
    tokens += 1;
  }
  loss = block_reduce(loss, Sum{}, scratch);
  nll = block_reduce(nll, Sum{}, scratch);
  tokens = block_reduce(tokens, Sum{}, scratch);
  bad = block_reduce(bad, Sum{}, scratch);
  if (threadIdx.x == 0) {
    sums[kLossSum] = loss;
    sums[kNllSum] = nll;
    sums[kTokens] = tokens;
    sums[kBadTargets] = bad;
  }
}

}  // namespace

void cross_entropy_rows(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                        float label_smoothing, int32_t ignore_index, float* row_loss_nll,
                        float* lse) {
  if (rows == 0) return;
  rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(
      logits, targets, vocab, label_smoothing, ignore_index, row_loss_nll, lse);
  TFM_CUDA_LAUNCHED(rows_kernel);
}

void cross_entropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                   float label_smoothing, int32_t ignore_index, float* lse, float* row_loss_nll,
                   double* sums) {
  cross_entropy_rows(logits, targets, rows, vocab, label_smoothing, ignore_index, row_loss_nll,
                     lse);
  sums_kernel<<<1, 1024, 0, stream()>>>(targets, row_loss_nll, rows, vocab, ignore_index, sums);
  TFM_CUDA_LAUNCHED(sums_kernel);
}

void cross_entropy_rows_with_grad(float* logits, const int32_t* targets, int64_t rows,
                                  int64_t vocab, float label_smoothing, int32_t ignore_index,
                                  float scale, float* row_loss_nll, bf16* dlogits_bf16) {
  if (rows == 0) return;
  rows_with_grad_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(
      logits, targets, vocab, label_smoothing, ignore_index, scale, row_loss_nll,
      reinterpret_cast<uint16_t*>(dlogits_bf16));
  TFM_CUDA_LAUNCHED(rows_with_grad_kernel);
}

void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate,
                            const float* scale_by) {
  if (rows == 0) return;
  backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream()>>>(
      logits, targets, lse, vocab, label_smoothing, ignore_index, scale, scale_by, dlogits,
      accumulate);
  TFM_CUDA_LAUNCHED(backward_kernel);
}

}  // namespace tfm::cuda
