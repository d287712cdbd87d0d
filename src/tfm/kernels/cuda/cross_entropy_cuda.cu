// Label-smoothed cross-entropy (cross_entropy_cuda.h): one block per row. The formulas are those of
// kernels/cpu/cross_entropy_cpu.cc: with lse = log sum_j e^{z_j} and q = (1 - eps) onehot(y) +
// eps/V,
//   loss_row = (1 - eps) (lse - z_y) + eps (lse - mean_j z_j),  nll_row = lse - z_y,
//   d loss_row / d z_j = p_j - q_j.
#include <cmath>
#include <cstdint>

#include "tfm/kernels/cuda/cross_entropy_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"
#include "tfm/kernels/cuda/reduce.cuh"

namespace tfm::internal::cuda {

namespace {

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

// Threads of a row's block: at least 16 elements each (four 16-byte loads), a whole number of
// warps, at most kMaxRowThreads. A vocabulary row of 37000 floats gets 512 threads.
constexpr int kMaxRowThreads = 512;

int row_threads(int64_t vocab) {
  const int64_t warps = (vocab + 16 * 32 - 1) / (16 * 32);
  return static_cast<int>(warps < 1 ? 32
                                    : (warps > kMaxRowThreads / 32 ? kMaxRowThreads : warps * 32));
}

// A row in three parts, so that the middle one moves in 16-byte vectors: `head` elements one at a
// time up to the first 16-byte boundary of z, `quads` groups of four, then the rest one at a time.
// The other pointers of the row (dz, and the bf16 copy with 8-byte stores of four values) must
// reach their boundaries at the same element; where they do not, the whole row goes one element
// at a time (head = vocab). Rows of a vocabulary divisible by 4 all split with head 0 when the
// arrays start aligned, as the allocator's do.
struct RowSplit {
  int64_t head, quads;
};

__device__ inline RowSplit split_row(const float* z, const float* dz, const uint16_t* dz_bf16,
                                     int64_t vocab) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(z);
  const int64_t head = static_cast<int64_t>(((16 - (at & 15)) & 15) / 4);
  bool aligned = (at & 3) == 0 && head <= vocab;
  if (dz != nullptr) aligned = aligned && ((reinterpret_cast<uintptr_t>(dz + head) & 15) == 0);
  if (dz_bf16 != nullptr)
    aligned = aligned && ((reinterpret_cast<uintptr_t>(dz_bf16 + head) & 7) == 0);
  if (!aligned) return {vocab, 0};
  return {head, (vocab - head) / 4};
}

// Online softmax normaliser: adds n values to a running maximum m and sum s = sum e^{z - m}. When
// the maximum grows the sum so far is rescaled by e^{m_old - m_new} (s is 0 while m is -inf, and a
// NaN in s stays NaN). The maximum ignores NaN (fmaxf), as the CPU's comparison does; a NaN or an
// infinite maximum still makes s NaN, as the CPU's e^{z - max} does. While m is -inf every value
// seen is -inf or NaN, so the exponentials are taken against 0: e^{-inf} adds 0, NaN stays.
template <int N>
__device__ inline void online_add(const float* v, float& m, float& s, float& sum_z) {
  float top = m;
#pragma unroll
  for (int i = 0; i < N; ++i) top = fmaxf(top, v[i]);
  if (top > m) {
    s *= expf(m - top);
    m = top;
  }
  const float base = m == -INFINITY ? 0.0f : m;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    s += expf(v[i] - base);
    sum_z += v[i];
  }
}

// The row's loss terms (cpu row_loss), computed by the whole block in one read of the row: each
// thread keeps a running (max, sum e^{z - max}, sum z) over its elements, four 16-byte loads in
// flight at a time; the block then takes the row's max and rescales every thread's sum to it,
// s e^{m - max} (a thread that saw nothing has s = 0, m = -inf), before adding them up. As on the
// CPU, a row of -inf gives NaN (e^{-inf - -inf}). The sums run in another order than the CPU's:
// equal within f32 rounding.
__device__ RowLoss row_loss(const float* z, int64_t vocab, int32_t y, double eps) {
  __shared__ float scratch[32];
  const int64_t threads = blockDim.x;
  float m = -INFINITY, s = 0.0f, sum_z = 0.0f;
  const RowSplit part = split_row(z, nullptr, nullptr, vocab);
  for (int64_t j = threadIdx.x; j < part.head; j += threads) online_add<1>(z + j, m, s, sum_z);
  const float4* z4 = reinterpret_cast<const float4*>(z + part.head);
  int64_t i = threadIdx.x;
  for (; i + 3 * threads < part.quads; i += 4 * threads) {
    const float4 v[4] = {z4[i], z4[i + threads], z4[i + 2 * threads], z4[i + 3 * threads]};
    online_add<16>(reinterpret_cast<const float*>(v), m, s, sum_z);
  }
  for (; i < part.quads; i += threads) {
    const float4 v = z4[i];
    online_add<4>(reinterpret_cast<const float*>(&v), m, s, sum_z);
  }
  for (int64_t j = part.head + 4 * part.quads + threadIdx.x; j < vocab; j += threads)
    online_add<1>(z + j, m, s, sum_z);
  const float max = block_max(m, scratch);
  const float sum_exp = block_sum(s * expf(m - max), scratch);
  sum_z = block_sum(sum_z, scratch);
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

// Four bf16 values in one 8-byte word, the first at the lowest address (little-endian).
__device__ inline uint2 pack_bf16(const float4& g) {
  return make_uint2(f32_to_bf16_bits(g.x) | (uint32_t{f32_to_bf16_bits(g.y)} << 16),
                    f32_to_bf16_bits(g.z) | (uint32_t{f32_to_bf16_bits(g.w)} << 16));
}

// dz = 0 over a row, by the block; only its bf16 copy when one is given.
__device__ void zero_row(float* dz, uint16_t* dz_bf16, int64_t vocab) {
  const RowSplit part = split_row(dz, nullptr, dz_bf16, vocab);
  const auto zero = [&](int64_t j) {
    if (dz_bf16 != nullptr) {
      dz_bf16[j] = 0;
    } else {
      dz[j] = 0.0f;
    }
  };
  for (int64_t j = threadIdx.x; j < part.head; j += blockDim.x) zero(j);
  for (int64_t j = part.head + 4 * part.quads + threadIdx.x; j < vocab; j += blockDim.x) zero(j);
  float4* dz4 = reinterpret_cast<float4*>(dz + part.head);
  for (int64_t i = threadIdx.x; i < part.quads; i += blockDim.x) {
    if (dz_bf16 != nullptr) {
      reinterpret_cast<uint2*>(dz_bf16 + part.head)[i] = make_uint2(0, 0);
    } else {
      dz4[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
}

// One element of the gradient: scale * (e^{z - lse} - eps / V), added to dz when accumulating,
// less scale * (1 - eps) at the target (`target_step`).
template <bool kAccumulate>
__device__ inline float grad_at(float z, float dz, int64_t j, int32_t y, float lse, float smooth,
                                float scale, float target_step) {
  float g = scale * (expf(z - lse) - smooth);
  if (kAccumulate) g = dz + g;
  if (j == y) g -= target_step;
  return g;
}

// dz (+)= scale * (e^{z - lse} - eps / V), and - scale * (1 - eps) at the target, by the block;
// when dz_bf16 is given (never with kAccumulate), only the result's bf16 copy is written (the
// products read nothing else: the f32 store would cost 4 bytes an element). dz may be z
// itself: each element is read and written by one thread, and read before it is written. This is
// z's last read, so it streams (__ldcs: evict first), as do the stores, keeping the L2 cache for
// the rows that other blocks are still reading in row_loss.
template <bool kAccumulate>
__device__ void row_grad(const float* z, int32_t y, float lse, int64_t vocab, float eps,
                         float scale, float* dz, uint16_t* dz_bf16) {
  const float smooth = eps / static_cast<float>(vocab);
  const float target_step = scale * (1.0f - eps);
  const int64_t threads = blockDim.x;
  const RowSplit part = split_row(z, dz, dz_bf16, vocab);
  const auto one = [&](int64_t j) {
    const float g = grad_at<kAccumulate>(z[j], kAccumulate ? dz[j] : 0.0f, j, y, lse, smooth, scale,
                                         target_step);
    if (dz_bf16 != nullptr) {
      dz_bf16[j] = f32_to_bf16_bits(g);
    } else {
      dz[j] = g;
    }
  };
  for (int64_t j = threadIdx.x; j < part.head; j += threads) one(j);
  for (int64_t j = part.head + 4 * part.quads + threadIdx.x; j < vocab; j += threads) one(j);
  const float4* z4 = reinterpret_cast<const float4*>(z + part.head);
  float4* dz4 = reinterpret_cast<float4*>(dz + part.head);
  uint2* bf16x4 = dz_bf16 != nullptr ? reinterpret_cast<uint2*>(dz_bf16 + part.head) : nullptr;
  // Two quads a thread per round: both loads are issued before the first store (which may alias).
  for (int64_t i = threadIdx.x; i < part.quads; i += 2 * threads) {
    const bool second = i + threads < part.quads;
    const float4 v[2] = {__ldcs(z4 + i), second ? __ldcs(z4 + i + threads) : float4{}};
    float4 d[2] = {};
    if (kAccumulate) {
      d[0] = dz4[i];
      if (second) d[1] = dz4[i + threads];
    }
    for (int k = 0; k < (second ? 2 : 1); ++k) {
      const int64_t q = i + k * threads;
      const int64_t j = part.head + 4 * q;
      float4 g;
      g.x = grad_at<kAccumulate>(v[k].x, d[k].x, j, y, lse, smooth, scale, target_step);
      g.y = grad_at<kAccumulate>(v[k].y, d[k].y, j + 1, y, lse, smooth, scale, target_step);
      g.z = grad_at<kAccumulate>(v[k].z, d[k].z, j + 2, y, lse, smooth, scale, target_step);
      g.w = grad_at<kAccumulate>(v[k].w, d[k].w, j + 3, y, lse, smooth, scale, target_step);
      if (bf16x4 != nullptr) {
        __stcs(bf16x4 + q, pack_bf16(g));
      } else {
        __stcs(dz4 + q, g);
      }
    }
  }
}

__global__ void __launch_bounds__(kMaxRowThreads)
    rows_kernel(const float* logits, const int32_t* targets, int64_t vocab, float eps,
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

// One read of the row for its loss terms, then one read and write for the gradient (the row is
// then likely still in the L2 cache): about 8 + 4 bytes of memory traffic per element, + 2 for
// the bf16 copy or + 4 for the f32 gradient.
__global__ void __launch_bounds__(kMaxRowThreads)
    rows_with_grad_kernel(float* logits, const int32_t* targets, int64_t vocab, float eps,
                          int32_t ignore_index, float scale, float* row_loss_nll,
                          uint16_t* dlogits_bf16) {
  const int64_t r = blockIdx.x;
  const int32_t y = targets[r];
  float* z = logits + r * vocab;
  uint16_t* z_bf16 = dlogits_bf16 != nullptr ? dlogits_bf16 + r * vocab : nullptr;
  if (!counted(y, ignore_index, vocab)) {
    if (threadIdx.x == 0) row_loss_nll[2 * r] = row_loss_nll[2 * r + 1] = 0.0f;
    zero_row(z, z_bf16, vocab);
    return;
  }
  const RowLoss row = row_loss(z, vocab, y, eps);  // ends with a barrier: z is read everywhere
  if (threadIdx.x == 0) {
    row_loss_nll[2 * r] = row.loss;
    row_loss_nll[2 * r + 1] = row.nll;
  }
  row_grad<false>(z, y, row.lse, vocab, eps, scale, z, z_bf16);
}

template <bool kAccumulate>
__global__ void __launch_bounds__(kMaxRowThreads)
    backward_kernel(const float* logits, const int32_t* targets, const float* lse, int64_t vocab,
                    float eps, int32_t ignore_index, float scale, const float* scale_by,
                    float* dlogits) {
  const int64_t r = blockIdx.x;
  const int32_t y = targets[r];
  float* dz = dlogits + r * vocab;
  if (!counted(y, ignore_index, vocab)) {
    if (!kAccumulate) zero_row(dz, nullptr, vocab);
    return;
  }
  if (scale_by != nullptr) scale *= *scale_by;
  row_grad<kAccumulate>(logits + r * vocab, y, lse[r], vocab, eps, scale, dz, nullptr);
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
  rows_kernel<<<static_cast<unsigned>(rows), row_threads(vocab), 0, stream()>>>(
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
  rows_with_grad_kernel<<<static_cast<unsigned>(rows), row_threads(vocab), 0, stream()>>>(
      logits, targets, vocab, label_smoothing, ignore_index, scale, row_loss_nll,
      reinterpret_cast<uint16_t*>(dlogits_bf16));
  TFM_CUDA_LAUNCHED(rows_with_grad_kernel);
}

void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate,
                            const float* scale_by) {
  if (rows == 0) return;
  const unsigned blocks = static_cast<unsigned>(rows);
  if (accumulate) {
    backward_kernel<true><<<blocks, row_threads(vocab), 0, stream()>>>(
        logits, targets, lse, vocab, label_smoothing, ignore_index, scale, scale_by, dlogits);
  } else {
    backward_kernel<false><<<blocks, row_threads(vocab), 0, stream()>>>(
        logits, targets, lse, vocab, label_smoothing, ignore_index, scale, scale_by, dlogits);
  }
  TFM_CUDA_LAUNCHED(backward_kernel);
}

}  // namespace tfm::internal::cuda
