// Fused training attention (fused_attention_cuda.h) on the tensor cores with mma.sync m16n8k16
// (bf16 operands, f32 accumulators), as FlashAttention-2: a block of 4 warps owns 64 rows (16 a
// warp) and walks the other side's tiles through shared memory, holding its accumulators in
// registers. Scores are kept in the log2 domain (x = s log2(e) / sqrt(d)) so exponentials are
// exp2f. Tiles are loaded from the f32 tensors and rounded to bf16 on the way into shared memory;
// rows past the end are zeros and masked.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"; lane = 4 g + t):
//   A 16x16 row-major: a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B 16x8 (k x n):    b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C 16x8:            c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g+8, 2t), (g+8, 2t+1)
// Two C tiles side by side are one A tile of the next product (P after S, dS after dP).
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "tfm/kernels/cuda/attention_dropout.cuh"
#include "tfm/kernels/cuda/fused_attention_cuda.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // the rows a block owns
constexpr int kPad = 8;             // bf16 per shared row beyond d: no bank conflicts below
constexpr float kLog2e = 1.4426950408889634f;

// ---- fragments ----

__device__ inline uint16_t bf16_bits(float x) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ inline uint32_t pack(float lo, float hi) {
  return static_cast<uint32_t>(bf16_bits(lo)) | (static_cast<uint32_t>(bf16_bits(hi)) << 16);
}

// Elements (r, c) and (r, c+1) of a shared tile with row stride S (c even: one 32-bit word).
template <int S>
__device__ inline uint32_t pair_in_row(const uint16_t* tile, int r, int c) {
  return *reinterpret_cast<const uint32_t*>(tile + r * S + c);
}

// Elements (r, c) and (r+1, c).
template <int S>
__device__ inline uint32_t pair_in_column(const uint16_t* tile, int r, int c) {
  return static_cast<uint32_t>(tile[r * S + c]) |
         (static_cast<uint32_t>(tile[(r + 1) * S + c]) << 16);
}

// acc (16x8) += a (16x16) b (16x8).
__device__ inline void mma(float acc[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The A fragments of a warp's 16 rows from row r0 of a row-major shared tile: a[kk] covers columns
// 16 kk .. 16 kk + 15.
template <int D, int S>
__device__ inline void load_a(const uint16_t* tile, int r0, uint32_t (&a)[D / 16][4]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    a[kk][0] = pair_in_row<S>(tile, r0 + g, 16 * kk + 2 * t);
    a[kk][1] = pair_in_row<S>(tile, r0 + g + 8, 16 * kk + 2 * t);
    a[kk][2] = pair_in_row<S>(tile, r0 + g, 16 * kk + 2 * t + 8);
    a[kk][3] = pair_in_row<S>(tile, r0 + g + 8, 16 * kk + 2 * t + 8);
  }
}

// acc[j] = a x^T for the tile x [N][D] (rows of x are the columns of the result: x^T is B with k
// along x's rows, contiguous): acc [16 x N] as N/8 C tiles.
template <int D, int N, int S>
__device__ inline void multiply_transposed(const uint32_t (&a)[D / 16][4], const uint16_t* x,
                                           float (&acc)[N / 8][4]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      mma(acc[j], a[kk], pair_in_row<S>(x, 8 * j + g, 16 * kk + 2 * t),
          pair_in_row<S>(x, 8 * j + g, 16 * kk + 2 * t + 8));
  }
}

// acc [16 x D] += p [16 x K] y for the tile y [K][D] (B with k along y's rows: pairs in columns);
// p is K/8 C tiles, rounded to bf16 here.
template <int K, int D, int S>
__device__ inline void multiply_accumulate(const float (&p)[K / 8][4], const uint16_t* y,
                                           float (&acc)[D / 8][4]) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const uint32_t a[4] = {pack(p[2 * kk][0], p[2 * kk][1]), pack(p[2 * kk][2], p[2 * kk][3]),
                           pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      mma(acc[n], a, pair_in_column<S>(y, 16 * kk + 2 * t, 8 * n + g),
          pair_in_column<S>(y, 16 * kk + 2 * t + 8, 8 * n + g));
  }
}

// ---- tiles and masks ----

// Rows [row0, row0 + R) of one head (columns [0, D) from `head`, row stride `stride` floats) into
// a shared bf16 tile; rows at or past `rows` are zeros. Every load of a thread is issued before the
// first store (16 bytes each where the head is 16-byte aligned, as the model's projections are):
// one round trip to memory a tile, not one a row.
template <int R, int D, int S>
__device__ inline void load_tile(uint16_t* tile, const float* head, int64_t stride, int64_t row0,
                                 int64_t rows) {
  constexpr int kQuads = R * D / 4;  // groups of 4 columns
  constexpr int kPerThread = (kQuads + kThreads - 1) / kThreads;
  if ((reinterpret_cast<uintptr_t>(head) & 15) != 0) {
    for (int i = threadIdx.x; i < R * D; i += kThreads) {
      const int r = i / D, c = i % D;
      const int64_t row = row0 + r;
      tile[r * S + c] = bf16_bits(row < rows ? head[row * stride + c] : 0.0f);
    }
    return;
  }
  float4 values[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int quad = threadIdx.x + i * kThreads;
    const int r = quad / (D / 4), c = quad % (D / 4) * 4;
    const int64_t row = row0 + r;
    values[i] = quad < kQuads && row < rows
                    ? __ldg(reinterpret_cast<const float4*>(head + row * stride + c))
                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int quad = threadIdx.x + i * kThreads;
    if (quad >= kQuads) break;
    const int r = quad / (D / 4), c = quad % (D / 4) * 4;
    *reinterpret_cast<uint2*>(tile + r * S + c) =
        make_uint2(pack(values[i].x, values[i].y), pack(values[i].z, values[i].w));
  }
}

// The keys query t of batch b sees: [0, visible_keys) (kernels::AttentionMaskSpec).
__device__ inline int64_t visible_keys(const kernels::AttentionDims& d,
                                       const kernels::AttentionMaskSpec& mask, int64_t b,
                                       int64_t t) {
  int64_t n = mask.key_lengths ? mask.key_lengths[b] : d.tk;
  if (mask.causal && t + mask.query_offset + 1 < n) n = t + mask.query_offset + 1;
  return n;
}

// The keys any of the queries [q0, q0 + kRows) sees (the last one sees the most).
__device__ inline int64_t tile_keys(const kernels::AttentionDims& d,
                                    const kernels::AttentionMaskSpec& mask, int64_t b, int64_t q0) {
  const int64_t last = (q0 + kRows < d.tq ? q0 + kRows : d.tq) - 1;
  return visible_keys(d, mask, b, last);
}

__device__ inline void store(float* dst, float value, bool accumulate) {
  *dst = accumulate ? *dst + value : value;
}

// The max (or sum) over the 4 lanes of a quad: they hold one row's columns.
__device__ inline float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

struct Head {               // where block (blockIdx.y = head, blockIdx.z = batch) reads and writes
  int64_t b, head, stride;  // stride: floats between rows of q, k, v, out (h*d)
  __device__ int64_t row_base(int64_t t_count) const { return b * t_count * stride; }
};

template <int D>
__device__ inline Head block_head(const kernels::AttentionDims& d) {
  return {blockIdx.z, blockIdx.y, d.heads * D};
}

// ---- forward ----

// Block (query tile x, head y, batch z): O = softmax(S) V over the visible keys with the online
// softmax (running max m and sum l per row; earlier partial sums rescaled by 2^(m_old - m_new)).
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    forward_kernel(kernels::AttentionDims d, kernels::AttentionMaskSpec mask,
                   kernels::AttentionDropout drop, const float* q, const float* k, const float* v,
                   float* lse, float* out) {
  constexpr int S = D + kPad, BK = 64;
  __shared__ __align__(16) uint16_t q_tile[kRows * S], k_tile[BK * S], v_tile[BK * S];
  const Head h = block_head<D>(d);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t rows[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  const int64_t seen[2] = {visible_keys(d, mask, h.b, rows[0]),
                           visible_keys(d, mask, h.b, rows[1])};
  const float scale = kLog2e / sqrtf(static_cast<float>(D));
  const float keep_scale = attention_keep_scale(drop);
  const uint64_t head_row = static_cast<uint64_t>(h.b * d.heads + h.head) * d.tq;

  // The query tile and the first key tile load together (one wait for memory, not two).
  load_tile<kRows, D, S>(q_tile, q + h.row_base(d.tq) + h.head * D, h.stride, q0, d.tq);
  uint32_t qa[D / 16][4] = {};

  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const int64_t keys = tile_keys(d, mask, h.b, q0);
  for (int64_t k0 = 0; k0 < keys; k0 += BK) {
    if (k0 > 0) __syncthreads();  // the last tile is read by every warp
    load_tile<BK, D, S>(k_tile, k + h.row_base(d.tk) + h.head * D, h.stride, k0, d.tk);
    load_tile<BK, D, S>(v_tile, v + h.row_base(d.tk) + h.head * D, h.stride, k0, d.tk);
    __syncthreads();
    if (k0 == 0) load_a<D, S>(q_tile, 16 * warp, qa);
    float s[BK / 8][4];
    multiply_transposed<D, BK, S>(qa, k_tile, s);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < BK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = k0 + 8 * j + 2 * t + (e & 1);
        s[j][e] = key < seen[e / 2] ? s[j][e] * scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[j][e]);
      }
    float ref[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float m_new = fmaxf(m[i], quad_max(tile_max[i]));
      ref[i] = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: every p is 0
      const float rescale = exp2f(m[i] - ref[i]);
      l[i] *= rescale;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][2 * i] *= rescale;
        o[n][2 * i + 1] *= rescale;
      }
      m[i] = m_new;
    }
#pragma unroll
    for (int j = 0; j < BK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[j][e] - ref[e / 2]);
        l[e / 2] += p;
        float kept = p;
        if (drop.p > 0.0f) {
          const int64_t key = k0 + 8 * j + 2 * t + (e & 1);
          const uint64_t index = (head_row + rows[e / 2]) * d.tk + key;
          kept = attention_dropout_keep(drop.seed, index, drop.p) ? p * keep_scale : 0.0f;
        }
        s[j][e] = kept;
      }
    multiply_accumulate<BK, D, S>(s, v_tile, o);
  }

  float* out_head = out + h.row_base(d.tq) + h.head * D;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float sum = quad_sum(l[i]);
    if (rows[i] >= d.tq) continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      out_head[rows[i] * h.stride + 8 * n + 2 * t] = o[n][2 * i] * inv;
      out_head[rows[i] * h.stride + 8 * n + 2 * t + 1] = o[n][2 * i + 1] * inv;
    }
    if (t == 0) lse[head_row + rows[i]] = sum > 0.0f ? m[i] + log2f(sum) : INFINITY;
  }
}

// ---- backward ----

// delta [B, h, Tq]: row (b, head, t) = dO . O over that head's d columns; one warp a row.
__global__ void delta_kernel(int64_t rows, int64_t heads, int64_t tq, int64_t d, const float* out,
                             const float* d_out, float* delta) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
       r < rows; r += warps) {
    const int64_t t = r % tq, bh = r / tq, head = bh % heads, b = bh / heads;
    const int64_t base = (b * tq + t) * heads * d + head * d;
    float sum = 0.0f;
    for (int64_t c = lane; c < d; c += 32) sum += out[base + c] * d_out[base + c];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) delta[r] = sum;
  }
}

// The recomputed weights of one score x (log2 domain, masked: -inf) of row `lse`'s query: P, and
// the dropped P as the forward multiplied it.
struct Weights {
  float p, kept, keep;  // keep: the dropout factor of dP (0 or 1/(1-p))
};

__device__ inline Weights recompute(float x, float row_lse, const kernels::AttentionDropout& drop,
                                    float keep_scale, uint64_t index) {
  const float p = exp2f(x - row_lse);
  float keep = 1.0f;
  if (drop.p > 0.0f) keep = attention_dropout_keep(drop.seed, index, drop.p) ? keep_scale : 0.0f;
  return {p, p * keep, keep};
}

// Block (query tile x, head y, batch z): dq = dS k / sqrt(d) over the visible keys.
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    dq_kernel(kernels::AttentionDims d, kernels::AttentionMaskSpec mask,
              kernels::AttentionDropout drop, const float* q, const float* k, const float* v,
              const float* lse, const float* delta, const float* d_out, float* dq,
              bool accumulate) {
  constexpr int S = D + kPad, BK = 32;
  __shared__ __align__(16) uint16_t q_tile[kRows * S], do_tile[kRows * S], k_tile[BK * S],
      v_tile[BK * S];
  const Head h = block_head<D>(d);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t rows[2] = {q0 + 16 * warp + g, q0 + 16 * warp + g + 8};
  const int64_t seen[2] = {visible_keys(d, mask, h.b, rows[0]),
                           visible_keys(d, mask, h.b, rows[1])};
  const float scale = kLog2e / sqrtf(static_cast<float>(D));
  const float keep_scale = attention_keep_scale(drop);
  const uint64_t head_row = static_cast<uint64_t>(h.b * d.heads + h.head) * d.tq;
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const bool real = rows[i] < d.tq;
    row_lse[i] = real ? lse[head_row + rows[i]] : INFINITY;
    row_delta[i] = real ? delta[head_row + rows[i]] : 0.0f;
  }

  load_tile<kRows, D, S>(q_tile, q + h.row_base(d.tq) + h.head * D, h.stride, q0, d.tq);
  load_tile<kRows, D, S>(do_tile, d_out + h.row_base(d.tq) + h.head * D, h.stride, q0, d.tq);
  uint32_t qa[D / 16][4] = {}, da[D / 16][4] = {};

  float acc[D / 8][4] = {};
  const int64_t keys = tile_keys(d, mask, h.b, q0);
  for (int64_t k0 = 0; k0 < keys; k0 += BK) {
    if (k0 > 0) __syncthreads();
    load_tile<BK, D, S>(k_tile, k + h.row_base(d.tk) + h.head * D, h.stride, k0, d.tk);
    load_tile<BK, D, S>(v_tile, v + h.row_base(d.tk) + h.head * D, h.stride, k0, d.tk);
    __syncthreads();
    if (k0 == 0) {
      load_a<D, S>(q_tile, 16 * warp, qa);
      load_a<D, S>(do_tile, 16 * warp, da);
    }
    float s[BK / 8][4], dp[BK / 8][4];
    multiply_transposed<D, BK, S>(qa, k_tile, s);
    multiply_transposed<D, BK, S>(da, v_tile, dp);
#pragma unroll
    for (int j = 0; j < BK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t key = k0 + 8 * j + 2 * t + (e & 1);
        const int i = e / 2;
        float ds = 0.0f;
        if (key < seen[i]) {
          const Weights w = recompute(s[j][e] * scale, row_lse[i], drop, keep_scale,
                                      (head_row + rows[i]) * d.tk + key);
          ds = w.p * (dp[j][e] * w.keep - row_delta[i]);
        }
        s[j][e] = ds;
      }
    multiply_accumulate<BK, D, S>(s, k_tile, acc);
  }

  const float alpha = 1.0f / sqrtf(static_cast<float>(D));
  float* dq_head = dq + h.row_base(d.tq) + h.head * D;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (rows[i] >= d.tq) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        store(dq_head + rows[i] * h.stride + 8 * n + 2 * t + c, alpha * acc[n][2 * i + c],
              accumulate);
  }
}

// Block (key tile x, head y, batch z), a warp's 16 rows now keys: with S^T = k q^T and dP^T = v
// dO^T per tile of queries, dv = (P keep/(1-p))^T dO and dk = dS^T q / sqrt(d).
template <int D>
__global__ void __launch_bounds__(kThreads, 2)
    dkv_kernel(kernels::AttentionDims d, kernels::AttentionMaskSpec mask,
               kernels::AttentionDropout drop, const float* q, const float* k, const float* v,
               const float* lse, const float* delta, const float* d_out,
               kernels::AttentionGrads grads) {
  constexpr int S = D + kPad, BQ = 32;
  __shared__ __align__(16) uint16_t k_tile[kRows * S], v_tile[kRows * S], q_tile[BQ * S],
      do_tile[BQ * S];
  __shared__ float lse_tile[BQ], delta_tile[BQ];
  const Head h = block_head<D>(d);
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t key_rows[2] = {k0 + 16 * warp + g, k0 + 16 * warp + g + 8};
  const float scale = kLog2e / sqrtf(static_cast<float>(D));
  const float keep_scale = attention_keep_scale(drop);
  const uint64_t head_row = static_cast<uint64_t>(h.b * d.heads + h.head) * d.tq;

  load_tile<kRows, D, S>(k_tile, k + h.row_base(d.tk) + h.head * D, h.stride, k0, d.tk);
  load_tile<kRows, D, S>(v_tile, v + h.row_base(d.tk) + h.head * D, h.stride, k0, d.tk);
  uint32_t ka[D / 16][4] = {}, va[D / 16][4] = {};

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  // Queries before the first that sees key k0 contribute nothing: causal query t sees key j when
  // j <= t + offset; with key lengths, no query sees a key at or past its batch's length.
  const int64_t length = mask.key_lengths ? mask.key_lengths[h.b] : d.tk;
  int64_t first = 0;
  if (mask.causal && k0 - mask.query_offset > 0) first = k0 - mask.query_offset;
  if (k0 >= length) first = d.tq;
  for (int64_t t0 = first / BQ * BQ; t0 < d.tq; t0 += BQ) {
    const bool first_tile = t0 == first / BQ * BQ;
    if (!first_tile) __syncthreads();
    load_tile<BQ, D, S>(q_tile, q + h.row_base(d.tq) + h.head * D, h.stride, t0, d.tq);
    load_tile<BQ, D, S>(do_tile, d_out + h.row_base(d.tq) + h.head * D, h.stride, t0, d.tq);
    for (int i = threadIdx.x; i < BQ; i += kThreads) {
      const bool real = t0 + i < d.tq;
      lse_tile[i] = real ? lse[head_row + t0 + i] : INFINITY;
      delta_tile[i] = real ? delta[head_row + t0 + i] : 0.0f;
    }
    __syncthreads();
    if (first_tile) {
      load_a<D, S>(k_tile, 16 * warp, ka);
      load_a<D, S>(v_tile, 16 * warp, va);
    }
    float st[BQ / 8][4], dpt[BQ / 8][4];
    multiply_transposed<D, BQ, S>(ka, q_tile, st);
    multiply_transposed<D, BQ, S>(va, do_tile, dpt);
#pragma unroll
    for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + 2 * t + (e & 1);
        const int64_t query = t0 + col, key = key_rows[e / 2];
        float kept = 0.0f, ds = 0.0f;
        if (query < d.tq && key < visible_keys(d, mask, h.b, query)) {
          const Weights w = recompute(st[j][e] * scale, lse_tile[col], drop, keep_scale,
                                      (head_row + query) * d.tk + key);
          kept = w.kept;
          ds = w.p * (dpt[j][e] * w.keep - delta_tile[col]);
        }
        st[j][e] = kept;
        dpt[j][e] = ds;
      }
    multiply_accumulate<BQ, D, S>(st, do_tile, dv);
    multiply_accumulate<BQ, D, S>(dpt, q_tile, dk);
  }

  // The same thread writes dv, then dk, of the same elements: k and v as one tensor accumulate.
  const float alpha = 1.0f / sqrtf(static_cast<float>(D));
  const int64_t base = h.row_base(d.tk) + h.head * D;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if (key_rows[i] >= d.tk) continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t at = base + key_rows[i] * h.stride + 8 * n + 2 * t + c;
        if (grads.dv) store(grads.dv + at, dv[n][2 * i + c], grads.accumulate_v);
        if (grads.dk) store(grads.dk + at, alpha * dk[n][2 * i + c], grads.accumulate_k);
      }
  }
}

// ---- launches ----

dim3 grid(int64_t rows, const kernels::AttentionDims& d) {
  return dim3(static_cast<unsigned>((rows + kRows - 1) / kRows), static_cast<unsigned>(d.heads),
              static_cast<unsigned>(d.batch));
}

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TFM_CUDA_FUSED_ATTENTION");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Calls f with the head width as a compile-time constant.
template <typename F>
void with_width(int64_t d, F&& f) {
  switch (d) {
    case 16:
      f(std::integral_constant<int, 16>{});
      break;
    case 32:
      f(std::integral_constant<int, 32>{});
      break;
    default:
      f(std::integral_constant<int, 64>{});
      break;
  }
}

}  // namespace

bool fused_attention_supports(const kernels::AttentionDims& dims) {
  return enabled() && dims.dk == dims.dv && (dims.dk == 16 || dims.dk == 32 || dims.dk == 64) &&
         dims.heads <= 65535 && dims.batch <= 65535;
}

void fused_attention_forward(const kernels::AttentionDims& dims,
                             const kernels::AttentionMaskSpec& mask,
                             const kernels::AttentionDropout& dropout, const float* q,
                             const float* k, const float* v, float* lse, float* out) {
  if (dims.batch * dims.heads * dims.tq == 0) return;
  with_width(dims.dk, [&](auto width) {
    constexpr int D = decltype(width)::value;
    forward_kernel<D>
        <<<grid(dims.tq, dims), kThreads, 0, stream()>>>(dims, mask, dropout, q, k, v, lse, out);
    TFM_CUDA_LAUNCHED(forward_kernel);
  });
}

int64_t fused_attention_backward_workspace(const kernels::AttentionDims& dims) {
  return dims.batch * dims.heads * dims.tq;
}

void fused_attention_backward(const kernels::AttentionDims& dims,
                              const kernels::AttentionMaskSpec& mask,
                              const kernels::AttentionDropout& dropout, const float* q,
                              const float* k, const float* v, const float* out, const float* lse,
                              const float* d_out, float* workspace,
                              const kernels::AttentionGrads& grads) {
  const int64_t rows = dims.batch * dims.heads * dims.tq;
  if (rows == 0 || dims.tk == 0) return;
  float* delta = workspace;
  constexpr int kDeltaThreads = 256;
  delta_kernel<<<grid_for(rows * 32, kDeltaThreads), kDeltaThreads, 0, stream()>>>(
      rows, dims.heads, dims.tq, dims.dk, out, d_out, delta);
  TFM_CUDA_LAUNCHED(delta_kernel);
  with_width(dims.dk, [&](auto width) {
    constexpr int D = decltype(width)::value;
    if (grads.dq) {
      dq_kernel<D><<<grid(dims.tq, dims), kThreads, 0, stream()>>>(
          dims, mask, dropout, q, k, v, lse, delta, d_out, grads.dq, grads.accumulate_q);
      TFM_CUDA_LAUNCHED(dq_kernel);
    }
    if (grads.dk || grads.dv) {
      dkv_kernel<D><<<grid(dims.tk, dims), kThreads, 0, stream()>>>(dims, mask, dropout, q, k, v,
                                                                    lse, delta, d_out, grads);
      TFM_CUDA_LAUNCHED(dkv_kernel);
    }
  });
}

}  // namespace tfm::internal::cuda
