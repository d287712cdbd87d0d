// Flash-style attention (attention_cuda.h). Every kernel gives a block (batch, head, tile of rows)
// and walks the other side in tiles of 32 held in shared memory, one lane per tile row, so that a
// score is one lane's dot product over the head and a tile's softmax statistics are warp
// reductions. Head rows in shared memory are padded to d + 1 floats: lane l reading row l at
// column i then hits bank (l * (d + 1) + i) % 32, all different.
#include <cmath>
#include <cstdint>

#include "tfm/kernels/cuda/attention_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::cuda {

namespace {

constexpr int kTile = 32;                  // keys (or queries) per tile: one per lane
constexpr int kChunks = kMaxHeadDim / 32;  // head columns per lane: lane, lane + 32, ...
constexpr unsigned kFull = 0xffffffffu;

// ---- the CPU's attention-dropout mask (kernels/cpu/attention_cpu.h), bit for bit ----

__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline bool dropout_keep(uint64_t seed, uint64_t index, float p) {
  const float u = static_cast<float>(splitmix64(splitmix64(seed) ^ index) >> 40) * 0x1p-24f;
  return u >= p;
}

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

Mask device_mask(const cpu::AttentionMaskSpec& spec) {
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
// e^{S_j - m} and acc = sum_j e^{S_j - m} keep_j / (1 - p) v_j, a tile with new maximum m' rescales
// both by e^{m - m'}. At the end O = acc / l (P = e^{S - m} / l) and lse = m + log l.
template <int QW, typename T>
__global__ void forward_kernel(cpu::AttentionDims d, Mask mask, cpu::AttentionDropout drop,
                               float alpha, const float* q, KeyValues<T> kv, float* probs,
                               float* lse, float* out) {
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
  const float keep_scale = drop.p > 0.0f ? 1.0f / (1.0f - drop.p) : 1.0f;

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
      float w = p;
      if (drop.p > 0.0f) {
        const uint64_t index =
            static_cast<uint64_t>(((bh * d.tq) + t0 + warp * QW + qi) * d.tk + j);
        w = valid && dropout_keep(drop.seed, index, drop.p) ? p * keep_scale : 0.0f;
      }
#pragma unroll
      for (int c = 0; c < kChunks; ++c) acc[qi][c] *= correction;
      for (int jj = 0; jj < kTile; ++jj) {
        const float wj = __shfl_sync(kFull, w, jj);
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
    if (lse != nullptr && lane == 0) lse[bh * d.tq + t] = row_lse[qi];
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
void launch_forward(const cpu::AttentionDims& dims, const Mask& mask,
                    const cpu::AttentionDropout& dropout, const float* q, const KeyValues<T>& kv,
                    float* probs, float* lse, float* out, int warps) {
  const int bq = warps * QW;
  if (dims.batch * dims.heads * dims.tq == 0) return;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dims.dk));
  const size_t shared = sizeof(float) * static_cast<size_t>(bq * dims.dk + kTile * (dims.dk + 1) +
                                                            kTile * (dims.dv + 1));
  const dim3 grid(static_cast<unsigned>(dims.batch * dims.heads),
                  static_cast<unsigned>((dims.tq + bq - 1) / bq));
  forward_kernel<QW, T>
      <<<grid, 32 * warps, shared, stream()>>>(dims, mask, dropout, alpha, q, kv, probs, lse, out);
  TFM_CUDA_LAUNCHED(forward_kernel);
}

// ---- backward ----

// delta_i = dO_i . O_i = sum_j dP_j P_j of row i (also with dropout: sum_j dD_j D_j = dO_i . O_i).
// One warp per row (b, head, t).
__global__ void delta_kernel(cpu::AttentionDims d, const float* out, const float* d_out,
                             float* delta) {
  const int64_t rows = d.batch * d.heads * d.tq;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t bh = row / d.tq, t = row % d.tq, b = bh / d.heads, head = bh % d.heads;
  const int64_t base = ((b * d.tq + t) * d.heads + head) * d.dv;
  float s = 0.0f;
  for (int64_t i = lane; i < d.dv; i += 32) s = fmaf(d_out[base + i], out[base + i], s);
  s = warp_sum(s);
  if (lane == 0) delta[row] = s;
}

// dq_i = sum_j dS_ij k_j with dS_ij = alpha P_ij (dP_ij - delta_i), dP = dD * keep / (1 - p) and
// dD_ij = dO_i . v_j. Block per (b, head, tile of queries) as in the forward.
template <int QW>
__global__ void dq_kernel(cpu::AttentionDims d, Mask mask, cpu::AttentionDropout drop, float alpha,
                          const float* q, KeyValues<float> kv, const float* lse, const float* d_out,
                          const float* delta, float* dq, bool accumulate) {
  extern __shared__ float smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bq = warps * QW;
  const int64_t bh = blockIdx.x, b = bh / d.heads, head = bh % d.heads;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * bq;
  const int ks = static_cast<int>(d.dk) + 1, vs = static_cast<int>(d.dv) + 1;
  float* q_s = smem;              // [bq][dk]
  float* do_s = q_s + bq * d.dk;  // [bq][dv]
  float* k_s = do_s + bq * d.dv;  // [kTile][dk + 1]
  float* v_s = k_s + kTile * ks;  // [kTile][dv + 1]
  load_rows(q, b, head, d.heads, d.tq, d.dk, t0, bq, static_cast<int>(d.dk), q_s);
  load_rows(d_out, b, head, d.heads, d.tq, d.dv, t0, bq, static_cast<int>(d.dv), do_s);

  float row_lse[QW], row_delta[QW], acc[QW][kChunks];
  int64_t n[QW];
#pragma unroll
  for (int qi = 0; qi < QW; ++qi) {
    const int64_t t = t0 + warp * QW + qi;
    n[qi] = t < d.tq ? mask.visible(b, t, d.tk) : 0;
    row_lse[qi] = t < d.tq ? lse[bh * d.tq + t] : 0.0f;
    row_delta[qi] = t < d.tq ? delta[bh * d.tq + t] : 0.0f;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc[qi][c] = 0.0f;
  }
  const int64_t t_last = (t0 + bq < d.tq ? t0 + bq : d.tq) - 1;
  const int64_t end = mask.visible(b, t_last, d.tk);
  const float keep_scale = drop.p > 0.0f ? 1.0f / (1.0f - drop.p) : 1.0f;

  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    load_tile(kv.k, kv.k_row_stride, kv.k_pos_stride, kv, b, head, d.dk, j0, end, k_s);
    load_tile(kv.v, kv.v_row_stride, kv.v_pos_stride, kv, b, head, d.dv, j0, end, v_s);
    __syncthreads();
    const int64_t j = j0 + lane;
#pragma unroll
    for (int qi = 0; qi < QW; ++qi) {
      const bool valid = j < n[qi];
      if (!__any_sync(kFull, valid)) continue;
      float ds = 0.0f;
      if (valid) {
        const int r = warp * QW + qi;
        const float p = expf(alpha * dot(q_s + r * d.dk, k_s + lane * ks, d.dk) - row_lse[qi]);
        float dp = dot(do_s + r * d.dv, v_s + lane * vs, d.dv);
        if (drop.p > 0.0f) {
          const uint64_t index = static_cast<uint64_t>((bh * d.tq + t0 + r) * d.tk + j);
          dp = dropout_keep(drop.seed, index, drop.p) ? dp * keep_scale : 0.0f;
        }
        ds = alpha * p * (dp - row_delta[qi]);
      }
      for (int jj = 0; jj < kTile; ++jj) {
        const float dsj = __shfl_sync(kFull, ds, jj);
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int col = lane + 32 * c;
          if (col < d.dk) acc[qi][c] = fmaf(dsj, k_s[jj * ks + col], acc[qi][c]);
        }
      }
    }
  }

#pragma unroll
  for (int qi = 0; qi < QW; ++qi) {
    const int64_t t = t0 + warp * QW + qi;
    if (t >= d.tq) continue;
    float* g = dq + ((b * d.tq + t) * d.heads + head) * d.dk;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int col = lane + 32 * c;
      if (col < d.dk) g[col] = accumulate ? g[col] + acc[qi][c] : acc[qi][c];
    }
  }
}

// dv_j = sum_i D_ij dO_i and dk_j = sum_i dS_ij q_i: block per (b, head, KW keys per warp),
// walking the queries that can see them in tiles of 32 (lane = query). A thread writes dv and
// then dk of the same (key, column), so one buffer passed as both accumulates correctly.
template <int KW>
__global__ void dkdv_kernel(cpu::AttentionDims d, Mask mask, cpu::AttentionDropout drop,
                            float alpha, const float* q, KeyValues<float> kv, const float* lse,
                            const float* d_out, const float* delta, cpu::AttentionGrads grads) {
  extern __shared__ float smem[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bk = warps * KW;
  const int64_t bh = blockIdx.x, b = bh / d.heads, head = bh % d.heads;
  const int64_t j_first = static_cast<int64_t>(blockIdx.y) * bk;
  const int qs = static_cast<int>(d.dk) + 1, os = static_cast<int>(d.dv) + 1;
  float* k_s = smem;               // [bk][dk]
  float* v_s = k_s + bk * d.dk;    // [bk][dv]
  float* q_s = v_s + bk * d.dv;    // [kTile][dk + 1]
  float* do_s = q_s + kTile * qs;  // [kTile][dv + 1]
  load_rows(kv.k, b, head, d.heads, d.tk, d.dk, j_first, bk, static_cast<int>(d.dk), k_s);
  load_rows(kv.v, b, head, d.heads, d.tk, d.dv, j_first, bk, static_cast<int>(d.dv), v_s);

  float acc_k[KW][kChunks], acc_v[KW][kChunks];
#pragma unroll
  for (int ki = 0; ki < KW; ++ki)
#pragma unroll
    for (int c = 0; c < kChunks; ++c) acc_k[ki][c] = acc_v[ki][c] = 0.0f;
  const float keep_scale = drop.p > 0.0f ? 1.0f / (1.0f - drop.p) : 1.0f;
  // Query t sees key j only when j < t + query_offset + 1 (causal): earlier queries see none.
  int64_t t_begin = 0;
  if (mask.causal && j_first - mask.query_offset > 0) t_begin = j_first - mask.query_offset;

  for (int64_t t0 = t_begin; t0 < d.tq; t0 += kTile) {
    __syncthreads();
    load_rows(q, b, head, d.heads, d.tq, d.dk, t0, kTile, qs, q_s);
    load_rows(d_out, b, head, d.heads, d.tq, d.dv, t0, kTile, os, do_s);
    __syncthreads();
    const int64_t t = t0 + lane;
    const int64_t n = t < d.tq ? mask.visible(b, t, d.tk) : 0;
    const float t_lse = t < d.tq ? lse[bh * d.tq + t] : 0.0f;
    const float t_delta = t < d.tq ? delta[bh * d.tq + t] : 0.0f;
#pragma unroll
    for (int ki = 0; ki < KW; ++ki) {
      const int r = warp * KW + ki;
      const int64_t j = j_first + r;
      const bool valid = j < n;  // n <= tk, so also j < tk
      if (!__any_sync(kFull, valid)) continue;
      float w = 0.0f, ds = 0.0f;
      if (valid) {
        const float p = expf(alpha * dot(q_s + lane * qs, k_s + r * d.dk, d.dk) - t_lse);
        float dp = dot(do_s + lane * os, v_s + r * d.dv, d.dv);
        w = p;
        if (drop.p > 0.0f) {
          const uint64_t index = static_cast<uint64_t>((bh * d.tq + t) * d.tk + j);
          const bool keep = dropout_keep(drop.seed, index, drop.p);
          w = keep ? p * keep_scale : 0.0f;
          dp = keep ? dp * keep_scale : 0.0f;
        }
        ds = alpha * p * (dp - t_delta);
      }
      for (int ii = 0; ii < kTile; ++ii) {
        const float wi = __shfl_sync(kFull, w, ii);
        const float dsi = __shfl_sync(kFull, ds, ii);
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int col = lane + 32 * c;
          if (col < d.dv) acc_v[ki][c] = fmaf(wi, do_s[ii * os + col], acc_v[ki][c]);
          if (col < d.dk) acc_k[ki][c] = fmaf(dsi, q_s[ii * qs + col], acc_k[ki][c]);
        }
      }
    }
  }

#pragma unroll
  for (int ki = 0; ki < KW; ++ki) {
    const int64_t j = j_first + warp * KW + ki;
    if (j >= d.tk) continue;
    if (grads.dv != nullptr) {
      float* g = grads.dv + ((b * d.tk + j) * d.heads + head) * d.dv;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int col = lane + 32 * c;
        if (col < d.dv) g[col] = grads.accumulate_v ? g[col] + acc_v[ki][c] : acc_v[ki][c];
      }
    }
    if (grads.dk != nullptr) {
      float* g = grads.dk + ((b * d.tk + j) * d.heads + head) * d.dk;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int col = lane + 32 * c;
        if (col < d.dk) g[col] = grads.accumulate_k ? g[col] + acc_k[ki][c] : acc_k[ki][c];
      }
    }
  }
}

KeyValues<float> dense_kv(const cpu::AttentionDims& dims, const float* k, const float* v) {
  return {k,
          v,
          dims.tk * dims.heads * dims.dk,
          dims.tk * dims.heads * dims.dv,
          dims.heads * dims.dk,
          dims.heads * dims.dv,
          nullptr,
          0,
          dims.batch};
}

// The CPU writes dv, then dq, then dk, and a buffer passed as several of them overwrites at its
// first write only. Here dv and dk are written first (one kernel, dv before dk), then dq: the first
// write in this order takes the flag of the first write in the CPU's order, later ones add.
cpu::AttentionGrads in_kernel_order(const cpu::AttentionGrads& in) {
  auto first_flag = [&](const float* p) {
    if (in.dv == p) return in.accumulate_v;
    if (in.dq == p) return in.accumulate_q;
    return in.accumulate_k;
  };
  cpu::AttentionGrads g = in;
  if (g.dv) g.accumulate_v = first_flag(g.dv);
  if (g.dk) g.accumulate_k = g.dk == g.dv ? true : first_flag(g.dk);
  if (g.dq) g.accumulate_q = g.dq == g.dv || g.dq == g.dk ? true : first_flag(g.dq);
  return g;
}

}  // namespace

void attention_forward(const cpu::AttentionDims& dims, const cpu::AttentionMaskSpec& mask,
                       const cpu::AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* lse, float* out) {
  launch_forward<4, float>(dims, device_mask(mask), dropout, q, dense_kv(dims, k, v), probs, lse,
                           out, 4);
}

void attention_forward_cached(const cpu::AttentionDims& dims, const cpu::AttentionMaskSpec& mask,
                              const float* q, const cpu::CachedKeyValues& kv, int64_t kv_rows,
                              float* probs, float* out) {
  // Few queries per step: one query per warp, up to four warps.
  const int warps = static_cast<int>(dims.tq < 4 ? dims.tq : 4);
  const cpu::AttentionDropout none{};
  if (kv.dtype == DType::bf16) {
    const KeyValues<uint16_t> cache{static_cast<const uint16_t*>(kv.k),
                                    static_cast<const uint16_t*>(kv.v),
                                    kv.k_batch_stride,
                                    kv.v_batch_stride,
                                    dims.heads * dims.dk,
                                    dims.heads * dims.dv,
                                    kv.slots,
                                    kv.slots_stride,
                                    kv_rows};
    launch_forward<1, uint16_t>(dims, device_mask(mask), none, q, cache, probs, nullptr, out,
                                warps);
  } else {
    const KeyValues<float> cache{static_cast<const float*>(kv.k),
                                 static_cast<const float*>(kv.v),
                                 kv.k_batch_stride,
                                 kv.v_batch_stride,
                                 dims.heads * dims.dk,
                                 dims.heads * dims.dv,
                                 kv.slots,
                                 kv.slots_stride,
                                 kv_rows};
    launch_forward<1, float>(dims, device_mask(mask), none, q, cache, probs, nullptr, out, warps);
  }
}

void attention_backward(const cpu::AttentionDims& dims, const cpu::AttentionMaskSpec& mask,
                        const cpu::AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* out, const float* lse, const float* d_out,
                        float* delta, const cpu::AttentionGrads& grads) {
  const cpu::AttentionGrads g = in_kernel_order(grads);
  const Mask m = device_mask(mask);
  const KeyValues<float> kv = dense_kv(dims, k, v);
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dims.dk));
  const unsigned bh = static_cast<unsigned>(dims.batch * dims.heads);
  constexpr int kWarps = 4;

  if (bh == 0) return;
  if ((g.dq || g.dk) && dims.tq > 0) {
    const int64_t rows = dims.batch * dims.heads * dims.tq;
    const unsigned blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    delta_kernel<<<blocks, 32 * kWarps, 0, stream()>>>(dims, out, d_out, delta);
    TFM_CUDA_LAUNCHED(delta_kernel);
  }
  // Two rows per warp keep shared memory under 48 KiB at dk = dv = 128.
  constexpr int kRowsPerWarp = 2, kBlockRows = kWarps * kRowsPerWarp;
  if (g.dv || g.dk) {
    const size_t shared = sizeof(float) * static_cast<size_t>(kBlockRows * (dims.dk + dims.dv) +
                                                              kTile * (dims.dk + dims.dv + 2));
    const dim3 grid(bh, static_cast<unsigned>((dims.tk + kBlockRows - 1) / kBlockRows));
    dkdv_kernel<kRowsPerWarp><<<grid, 32 * kWarps, shared, stream()>>>(dims, m, dropout, alpha, q,
                                                                       kv, lse, d_out, delta, g);
    TFM_CUDA_LAUNCHED(dkdv_kernel);
  }
  if (g.dq && dims.tq > 0) {
    const size_t shared = sizeof(float) * static_cast<size_t>(kBlockRows * (dims.dk + dims.dv) +
                                                              kTile * (dims.dk + dims.dv + 2));
    const dim3 grid(bh, static_cast<unsigned>((dims.tq + kBlockRows - 1) / kBlockRows));
    dq_kernel<kRowsPerWarp><<<grid, 32 * kWarps, shared, stream()>>>(
        dims, m, dropout, alpha, q, kv, lse, d_out, delta, g.dq, g.accumulate_q);
    TFM_CUDA_LAUNCHED(dq_kernel);
  }
}

}  // namespace tfm::cuda
