// Flash-style decoding attention over a key/value cache (attention_cuda.h). A block (batch, head,
// tile of queries) walks the keys in tiles of 32 held in shared memory, one lane per key, so that
// a score is one lane's dot product over the head and a tile's softmax statistics are warp
// reductions. Head rows in shared memory are padded to d + 1 floats: lane l reading row l at
// column i then hits bank (l * (d + 1) + i) % 32, all different.
#include <cmath>
#include <cstdint>

#include "tfm/kernels/cuda/attention_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kTile = 32;                  // keys per tile: one per lane
constexpr int kChunks = kMaxHeadDim / 32;  // head columns per lane: lane, lane + 32, ...
constexpr unsigned kFull = 0xffffffffu;

// The CPU's AttentionMaskSpec on the device: query t of batch b sees keys [0, visible(b, t)).
// Non-decreasing in t, so a tile's last query sees the most keys.
struct Mask {
  const int32_t* key_lengths;
  bool causal;
  int64_t query_offset;

  __device__ int64_t visible(int64_t b, int64_t t, int64_t tk) const {
    int64_t n = key_lengths ? key_lengths[b] : tk;
    if (causal && t + query_offset + 1 < n) n = t + query_offset + 1;
    return n;
  }
};

Mask device_mask(const kernels::AttentionMaskSpec& spec) {
  return {spec.key_lengths, spec.causal, spec.query_offset};
}

__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(kFull, x, o));
  return x;
}

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(kFull, x, o);
  return x;
}

__device__ inline float to_float(float x) {
  return x;
}
// bf16 is the upper half of an f32.
__device__ inline float to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// Where key/value position j of batch b lives: row(b, j) of [rows, positions, h*d] buffers.
// Dense inputs: row b; a cache with a slot table: the slot (-1 when it is out of range).
template <typename T>
struct KeyValues {
  const T* k;
  const T* v;
  int64_t k_row_stride, v_row_stride;  // elements between rows
  int64_t k_pos_stride, v_pos_stride;  // elements between positions: h*dk, h*dv
  const int32_t* slots;
  int64_t slots_stride;
  int64_t rows;

  __device__ int64_t row(int64_t b, int64_t j) const {
    if (slots == nullptr) return b;
    const int64_t s = slots[b * slots_stride + j];
    return s >= 0 && s < rows ? s : -1;
  }
};

// out[jj * (d + 1) + i] = column i of head `head` at position j0 + jj of batch b, for jj < kTile;
// 0 at positions >= end, NaN where the slot is out of range. Called by the whole block.
template <typename T>
__device__ void load_tile(const T* base, int64_t row_stride, int64_t pos_stride,
                          const KeyValues<T>& kv, int64_t b, int64_t head, int64_t d, int64_t j0,
                          int64_t end, float* out) {
  for (int e = threadIdx.x; e < kTile * d; e += blockDim.x) {
    const int jj = e / static_cast<int>(d), i = e % static_cast<int>(d);
    const int64_t j = j0 + jj;
    float x = 0.0f;
    if (j < end) {
      const int64_t r = kv.row(b, j);
      x = r < 0 ? __int_as_float(0x7fc00000)
                : to_float(base[r * row_stride + j * pos_stride + head * d + i]);
    }
    out[jj * (d + 1) + i] = x;
  }
}

// Rows [t0, t0 + n) of a dense [B, T, h*d] tensor's head into out[n][stride] (0 beyond T).
__device__ void load_rows(const float* x, int64_t b, int64_t head, int64_t heads, int64_t t_count,
                          int64_t d, int64_t t0, int n, int stride, float* out) {
  for (int e = threadIdx.x; e < n * d; e += blockDim.x) {
    const int r = e / static_cast<int>(d), i = e % static_cast<int>(d);
    const int64_t t = t0 + r;
    out[r * stride + i] = t < t_count ? x[((b * t_count + t) * heads + head) * d + i] : 0.0f;
  }
}

__device__ inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma unroll 4
  for (int64_t i = 0; i < n; ++i) s = fmaf(a[i], b[i], s);
  return s;
}

// ---- forward: a block of `warps` warps holds QW queries per warp ----
//
// Online softmax per query over key tiles: with m the running maximum of the scores, l = sum_j
// e^{S_j - m} and acc = sum_j e^{S_j - m} v_j, a tile with new maximum m' rescales both by
// e^{m - m'}. At the end O = acc / l (P = e^{S - m} / l, recomputed with lse = m + log l).
template <int QW, typename T>
__global__ void forward_kernel(kernels::AttentionDims d, Mask mask, float alpha, const float* q,
                               KeyValues<T> kv, float* probs, float* out) {
  extern __shared__ float smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bq = warps * QW;
  const int64_t bh = blockIdx.x, b = bh / d.heads, head = bh % d.heads;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * bq;
  const int ks = static_cast<int>(d.dk) + 1, vs = static_cast<int>(d.dv) + 1;
  float* q_s = smem;              // [bq][dk]
  float* k_s = q_s + bq * d.dk;   // [kTile][dk + 1]
  float* v_s = k_s + kTile * ks;  // [kTile][dv + 1]
  load_rows(q, b, head, d.heads, d.tq, d.dk, t0, bq, static_cast<int>(d.dk), q_s);

  float m[QW], l[QW], acc[QW][kChunks];
  int64_t n[QW];
#pragma unroll
  for (int qi = 0; qi < QW; ++qi) {
    const int64_t t = t0 + warp * QW + qi;
    n[qi] = t < d.tq ? mask.visible(b, t, d.tk) : 0;
    m[qi] = -INFINITY;
    l[qi] = 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[qi][c] = 0.0f;
  }
  const int64_t t_last = (t0 + bq < d.tq ? t0 + bq : d.tq) - 1;
  const int64_t end = mask.visible(b, t_last, d.tk);

  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and q_s written, the first time)
    load_tile(kv.k, kv.k_row_stride, kv.k_pos_stride, kv, b, head, d.dk, j0, end, k_s);
    load_tile(kv.v, kv.v_row_stride, kv.v_pos_stride, kv, b, head, d.dv, j0, end, v_s);
    __syncthreads();
    const int64_t j = j0 + lane;
#pragma unroll
    for (int qi = 0; qi < QW; ++qi) {
      const bool valid = j < n[qi];
      if (!__any_sync(kFull, valid)) continue;  // warp-uniform: no key of the tile is visible
      const float s =
          valid ? alpha * dot(q_s + (warp * QW + qi) * d.dk, k_s + lane * ks, d.dk) : -INFINITY;
      const float m_new = fmaxf(m[qi], warp_max(s));
      const float p = valid ? expf(s - m_new) : 0.0f;
      const float correction = expf(m[qi] - m_new);
      l[qi] = l[qi] * correction + warp_sum(p);
      m[qi] = m_new;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) acc[qi][c] *= correction;
      for (int jj = 0; jj < kTile; ++jj) {
        const float wj = __shfl_sync(kFull, p, jj);
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int col = lane + 32 * c;
          if (col < d.dv) acc[qi][c] = fmaf(wj, v_s[jj * vs + col], acc[qi][c]);
        }
      }
    }
  }

  float row_lse[QW];
#pragma unroll
  for (int qi = 0; qi < QW; ++qi) {
    const int64_t t = t0 + warp * QW + qi;
    row_lse[qi] = m[qi] + logf(l[qi]);
    if (t >= d.tq) continue;
    const float inv = 1.0f / l[qi];
    float* o = out + ((b * d.tq + t) * d.heads + head) * d.dv;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = lane + 32 * c;
      if (col < d.dv) o[col] = acc[qi][c] * inv;
    }
  }
  if (probs == nullptr) return;

  // P = e^{S - lse} on visible keys, 0 on the others, recomputed tile by tile.
  for (int64_t j0 = 0; j0 < d.tk; j0 += kTile) {
    __syncthreads();
    load_tile(kv.k, kv.k_row_stride, kv.k_pos_stride, kv, b, head, d.dk, j0, end, k_s);
    __syncthreads();
    const int64_t j = j0 + lane;
#pragma unroll
    for (int qi = 0; qi < QW; ++qi) {
      const int64_t t = t0 + warp * QW + qi;
      if (t >= d.tq || j >= d.tk) continue;
      float p = 0.0f;
      if (j < n[qi])
        p = expf(alpha * dot(q_s + (warp * QW + qi) * d.dk, k_s + lane * ks, d.dk) - row_lse[qi]);
      probs[(bh * d.tq + t) * d.tk + j] = p;
    }
  }
}

template <int QW, typename T>
void launch_forward(const kernels::AttentionDims& dims, const Mask& mask, const float* q,
                    const KeyValues<T>& kv, float* probs, float* out, int warps) {
  const int bq = warps * QW;
  if (dims.batch * dims.heads * dims.tq == 0) return;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dims.dk));
  const size_t shared = sizeof(float) * static_cast<size_t>(bq * dims.dk + kTile * (dims.dk + 1) +
                                                            kTile * (dims.dv + 1));
  const dim3 grid(static_cast<unsigned>(dims.batch * dims.heads),
                  static_cast<unsigned>((dims.tq + bq - 1) / bq));
  forward_kernel<QW, T>
      <<<grid, 32 * warps, shared, stream()>>>(dims, mask, alpha, q, kv, probs, out);
  TFM_CUDA_LAUNCHED(forward_kernel);
}

// The cache's buffers read as T (float, or uint16_t holding bf16), one query per warp.
template <typename T>
void launch_cached(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                   const float* q, const kernels::CachedKeyValues& kv, int64_t kv_rows,
                   float* probs, float* out, int warps) {
  const KeyValues<T> cache{static_cast<const T*>(kv.k),
                           static_cast<const T*>(kv.v),
                           kv.k_batch_stride,
                           kv.v_batch_stride,
                           dims.heads * dims.dk,
                           dims.heads * dims.dv,
                           kv.slots,
                           kv.slots_stride,
                           kv_rows};
  launch_forward<1, T>(dims, device_mask(mask), q, cache, probs, out, warps);
}

}  // namespace

void attention_forward_cached(const kernels::AttentionDims& dims,
                              const kernels::AttentionMaskSpec& mask, const float* q,
                              const kernels::CachedKeyValues& kv, int64_t kv_rows, float* probs,
                              float* out) {
  // Few queries per step: one query per warp, up to four warps.
  const int warps = static_cast<int>(dims.tq < 4 ? dims.tq : 4);
  if (kv.dtype == DType::bf16) {
    launch_cached<uint16_t>(dims, mask, q, kv, kv_rows, probs, out, warps);
  } else {
    launch_cached<float>(dims, mask, q, kv, kv_rows, probs, out, warps);
  }
}

}  // namespace tfm::internal::cuda
