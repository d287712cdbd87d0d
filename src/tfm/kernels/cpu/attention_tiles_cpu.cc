// attention_forward and attention_backward (attention_cpu.h) one (batch, head) tile at a time: a
// thread takes whole tiles, and a tile's six small products (S = q k^T, O = D v; dD = dO v^T,
// dv = D^T dO, dq = dS k, dk = dS^T q) run from the cache in register blocks of 4 rows, with the
// softmax and its backward in between. A training batch's tiles are small (Multi30k: 16 queries, 16
// keys, heads of 32), where oneDNN's strided products over all tiles ran at a tenth of the f32
// rate.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tfm/kernels/cpu/attention_cpu.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/softmax_cpu.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// 16 floats side by side: one AVX-512 register, two AVX2 ones, four SSE ones (GCC's vector
// extension lowers it to what the kernel set has). Moved to and from memory by reference only: a
// function that took or returned one by value would change the calling convention between sets.
constexpr int64_t kLanes = 16;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));
// Rows of a register block: 4 rows x 2 Lanes of accumulators, and the 2 Lanes they share.
constexpr int64_t kRows = 4;

inline void load(Lanes& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}

// out[0, count) = v[0, count); with `accumulate`, out += v.
inline void store(const Lanes& v, float* out, int64_t count, bool accumulate) {
  if (count == kLanes) {
    Lanes sum = v;
    if (accumulate) {
      Lanes old;
      load(old, out);
      sum += old;
    }
    std::memcpy(out, &sum, sizeof sum);
    return;
  }
  float lanes[kLanes];
  std::memcpy(lanes, &v, sizeof lanes);
  for (int64_t l = 0; l < count; ++l) out[l] = accumulate ? out[l] + lanes[l] : lanes[l];
}

int64_t round_up_to_lanes(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

// out[r * so + j] = scale * sum over d of x[r * sx + d] * mt[d * ld + j], for r < m and j < n: the
// dot products of m rows of x with n rows of a matrix given transposed (mt [width, ld], ld a
// multiple of kLanes, zero beyond n).
void dots_with_transposed(const float* x, int64_t sx, int64_t m, const float* mt, int64_t ld,
                          int64_t width, int64_t n, float scale, float* out, int64_t so) {
  for (int64_t j0 = 0; j0 < n; j0 += kLanes) {
    const int64_t count = std::min(kLanes, n - j0);
    int64_t r = 0;
    // 8 rows at a time: 8 independent sums, enough to keep both FMA pipes busy through the FMA's
    // latency (4 rows kept them half idle).
    for (; r + 2 * kRows <= m; r += 2 * kRows) {
      const float* x0 = x + r * sx;
      Lanes a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, a7 = {}, column;
      for (int64_t d = 0; d < width; ++d) {
        load(column, mt + d * ld + j0);
        a0 += x0[d] * column;
        a1 += x0[sx + d] * column;
        a2 += x0[2 * sx + d] * column;
        a3 += x0[3 * sx + d] * column;
        a4 += x0[4 * sx + d] * column;
        a5 += x0[5 * sx + d] * column;
        a6 += x0[6 * sx + d] * column;
        a7 += x0[7 * sx + d] * column;
      }
      float* o = out + r * so + j0;
      store(a0 * scale, o, count, false);
      store(a1 * scale, o + so, count, false);
      store(a2 * scale, o + 2 * so, count, false);
      store(a3 * scale, o + 3 * so, count, false);
      store(a4 * scale, o + 4 * so, count, false);
      store(a5 * scale, o + 5 * so, count, false);
      store(a6 * scale, o + 6 * so, count, false);
      store(a7 * scale, o + 7 * so, count, false);
    }
    for (; r + kRows <= m; r += kRows) {
      const float *x0 = x + r * sx, *x1 = x0 + sx, *x2 = x1 + sx, *x3 = x2 + sx;
      Lanes a0 = {}, a1 = {}, a2 = {}, a3 = {}, column;
      for (int64_t d = 0; d < width; ++d) {
        load(column, mt + d * ld + j0);
        a0 += x0[d] * column;
        a1 += x1[d] * column;
        a2 += x2[d] * column;
        a3 += x3[d] * column;
      }
      store(a0 * scale, out + r * so + j0, count, false);
      store(a1 * scale, out + (r + 1) * so + j0, count, false);
      store(a2 * scale, out + (r + 2) * so + j0, count, false);
      store(a3 * scale, out + (r + 3) * so + j0, count, false);
    }
    for (; r < m; ++r) {
      const float* x0 = x + r * sx;
      Lanes a0 = {}, column;
      for (int64_t d = 0; d < width; ++d) {
        load(column, mt + d * ld + j0);
        a0 += x0[d] * column;
      }
      store(a0 * scale, out + r * so + j0, count, false);
    }
  }
}

// out[r * so + c] (=, or += with `accumulate`) sum over i < n of coef(r, i) * rows[i * sr + c], for
// r < m and c < width, where coef(r, i) = coef[r * cr + i * ci]: a product with m rows of
// coefficients, or (cr = 1) with their transpose.
void weighted_rows(const float* coef, int64_t cr, int64_t ci, int64_t m, int64_t n,
                   const float* rows, int64_t sr, int64_t width, float* out, int64_t so,
                   bool accumulate) {
  int64_t c0 = 0;
  for (; c0 + 2 * kLanes <= width; c0 += 2 * kLanes) {
    int64_t r = 0;
    for (; r + kRows <= m; r += kRows) {
      Lanes a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
      Lanes v0, v1;
      for (int64_t i = 0; i < n; ++i) {
        load(v0, rows + i * sr + c0);
        load(v1, rows + i * sr + c0 + kLanes);
        const float* k = coef + r * cr + i * ci;
        const float k0 = k[0], k1 = k[cr], k2 = k[2 * cr], k3 = k[3 * cr];
        a00 += k0 * v0;
        a01 += k0 * v1;
        a10 += k1 * v0;
        a11 += k1 * v1;
        a20 += k2 * v0;
        a21 += k2 * v1;
        a30 += k3 * v0;
        a31 += k3 * v1;
      }
      float* o = out + r * so + c0;
      store(a00, o, kLanes, accumulate);
      store(a01, o + kLanes, kLanes, accumulate);
      store(a10, o + so, kLanes, accumulate);
      store(a11, o + so + kLanes, kLanes, accumulate);
      store(a20, o + 2 * so, kLanes, accumulate);
      store(a21, o + 2 * so + kLanes, kLanes, accumulate);
      store(a30, o + 3 * so, kLanes, accumulate);
      store(a31, o + 3 * so + kLanes, kLanes, accumulate);
    }
    for (; r < m; ++r) {
      Lanes a0 = {}, a1 = {}, v0, v1;
      for (int64_t i = 0; i < n; ++i) {
        load(v0, rows + i * sr + c0);
        load(v1, rows + i * sr + c0 + kLanes);
        const float k0 = coef[r * cr + i * ci];
        a0 += k0 * v0;
        a1 += k0 * v1;
      }
      store(a0, out + r * so + c0, kLanes, accumulate);
      store(a1, out + r * so + c0 + kLanes, kLanes, accumulate);
    }
  }
  for (; c0 + kLanes <= width; c0 += kLanes) {
    for (int64_t r = 0; r < m; ++r) {
      Lanes a0 = {}, v0;
      for (int64_t i = 0; i < n; ++i) {
        load(v0, rows + i * sr + c0);
        a0 += coef[r * cr + i * ci] * v0;
      }
      store(a0, out + r * so + c0, kLanes, accumulate);
    }
  }
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = c0; c < width; ++c) {
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) sum += coef[r * cr + i * ci] * rows[i * sr + c];
      out[r * so + c] = accumulate ? out[r * so + c] + sum : sum;
    }
}

// Lane l of a pair of rows after their off-diagonal blocks of b lanes are swapped: the first row
// keeps its even blocks and takes the second's even blocks as its odd ones; the second row takes
// the first's odd blocks as its even ones and keeps its odd blocks (lanes of the second are 16-31).
constexpr int first_of_pair(int b, int l) {
  return (l / b) % 2 == 0 ? l : 16 + l - b;
}
constexpr int second_of_pair(int b, int l) {
  return (l / b) % 2 == 0 ? l + b : 16 + l;
}

// One round of transpose16: rows i and i + B (i / B even) swap their off-diagonal blocks of B
// lanes, one two-source permute per row (vpermt2ps on AVX-512).
template <int B>
void swap_blocks(Lanes r[16]) {
  for (int i = 0; i < 16; ++i) {
    if ((i / B) % 2) continue;
    const Lanes low = r[i], high = r[i + B];
    r[i] = __builtin_shufflevector(low, high, first_of_pair(B, 0), first_of_pair(B, 1),
                                   first_of_pair(B, 2), first_of_pair(B, 3), first_of_pair(B, 4),
                                   first_of_pair(B, 5), first_of_pair(B, 6), first_of_pair(B, 7),
                                   first_of_pair(B, 8), first_of_pair(B, 9), first_of_pair(B, 10),
                                   first_of_pair(B, 11), first_of_pair(B, 12), first_of_pair(B, 13),
                                   first_of_pair(B, 14), first_of_pair(B, 15));
    r[i + B] = __builtin_shufflevector(
        low, high, second_of_pair(B, 0), second_of_pair(B, 1), second_of_pair(B, 2),
        second_of_pair(B, 3), second_of_pair(B, 4), second_of_pair(B, 5), second_of_pair(B, 6),
        second_of_pair(B, 7), second_of_pair(B, 8), second_of_pair(B, 9), second_of_pair(B, 10),
        second_of_pair(B, 11), second_of_pair(B, 12), second_of_pair(B, 13), second_of_pair(B, 14),
        second_of_pair(B, 15));
  }
}

// A 16 x 16 block transposed in registers: the off-diagonal blocks of 8, 4, 2 and 1 swapped in
// turn.
void transpose16(Lanes r[16]) {
  swap_blocks<8>(r);
  swap_blocks<4>(r);
  swap_blocks<2>(r);
  swap_blocks<1>(r);
}

// rows_t [width, ld] = rows [n, width] (stride `stride`) transposed; columns n..ld are 0. Blocks of
// 16 x 16 in registers, the columns past the last whole block one by one.
void transpose_rows(const float* rows, int64_t n, int64_t width, int64_t stride, int64_t ld,
                    float* rows_t) {
  int64_t d0 = 0;
  for (; d0 + kLanes <= width; d0 += kLanes)
    for (int64_t j0 = 0; j0 < ld; j0 += kLanes) {
      Lanes block[kLanes];
      for (int64_t l = 0; l < kLanes; ++l) {
        if (j0 + l < n) {
          load(block[l], rows + (j0 + l) * stride + d0);
        } else {
          block[l] = Lanes{};
        }
      }
      transpose16(block);
      for (int64_t l = 0; l < kLanes; ++l)
        std::memcpy(rows_t + (d0 + l) * ld + j0, &block[l], sizeof(Lanes));
    }
  for (int64_t d = d0; d < width; ++d) {
    float* column = rows_t + d * ld;
    for (int64_t j = 0; j < n; ++j) column[j] = rows[j * stride + d];
    std::fill(column + n, column + ld, 0.0f);
  }
}

// One (batch, head) tile: where its rows start in the [B, T, h*d] projections (row strides ldq,
// ldk, ldv, ldo) and in the [B, h, Tq, Tk] buffers (row first_row: element first_row * tk).
struct Tile {
  int64_t b = 0, head = 0, first_row = 0;
  int64_t q = 0, k = 0, v = 0, o = 0;  // offsets of the first row of each
  int64_t ldq = 0, ldk = 0, ldv = 0, ldo = 0;
};

Tile tile_of(const AttentionDims& dims, int64_t index) {
  Tile t;
  t.b = index / dims.heads;
  t.head = index % dims.heads;
  t.first_row = index * dims.tq;
  t.ldq = t.ldk = dims.heads * dims.dk;
  t.ldv = t.ldo = dims.heads * dims.dv;
  t.q = t.b * dims.tq * t.ldq + t.head * dims.dk;
  t.k = t.b * dims.tk * t.ldk + t.head * dims.dk;
  t.v = t.b * dims.tk * t.ldv + t.head * dims.dv;
  t.o = t.b * dims.tq * t.ldo + t.head * dims.dv;
  return t;
}

// Asks for the rows of a tile's block of a [B, T, h*d] tensor (`rows` rows of `width` floats,
// `stride` apart) to be brought into L2 before they are used. The tiles' inputs were written long
// before (in the forward) or by a product that has since moved other data through the cache:
// fetched as they are used, they stall the tile's small products. Asked for one tile ahead, they
// arrive while the tile before computes. Into L2, not L1: two tiles' blocks do not fit in L1 beside
// the tile's buffers, and prefetching into L1 slowed tiles whose data was already cached by 9-13%.
void prefetch_block(const float* first, int64_t rows, int64_t width, int64_t stride) {
  constexpr int64_t kLineFloats = 16;  // 64-byte lines
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; c += kLineFloats)
      __builtin_prefetch(first + r * stride + c, 0, 2);  // prefetcht1: into L2
}

// D = P * keep / (1 - p) for row `row` of P: element j has index row * tk + j.
void drop_row(const AttentionDropout& dropout, int64_t row, int64_t tk, const float* p, float* d) {
  const float keep_scale = 1.0f / (1.0f - dropout.p);
  for (int64_t j = 0; j < tk; ++j) {
    const bool keep =
        attention_dropout_keep(dropout.seed, static_cast<uint64_t>(row * tk + j), dropout.p);
    d[j] = keep ? p[j] * keep_scale : 0.0f;
  }
}

// Enough work to share out, or one thread.
bool worth_threads(const AttentionDims& dims) {
  return dims.batch * dims.heads > 1 &&
         dims.prob_count() * (dims.dk + dims.dv) >= kParallelMinElements;
}

}  // namespace

void attention_forward(const AttentionDims& dims, const AttentionMaskSpec& mask,
                       const AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* dropped, float* out) {
  const int64_t tq = dims.tq, tk = dims.tk, ld = round_up_to_lanes(tk);
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dims.dk));
  const int64_t tiles = dims.batch * dims.heads;
#pragma omp parallel if (worth_threads(dims))
  {
    std::vector<float> k_t(static_cast<size_t>(dims.dk * ld));  // the tile's keys, transposed
#pragma omp for schedule(static)
    for (int64_t index = 0; index < tiles; ++index) {
      const Tile tile = tile_of(dims, index);
      if (index + 1 < tiles) {
        const Tile next = tile_of(dims, index + 1);
        prefetch_block(q + next.q, tq, dims.dk, next.ldq);
        prefetch_block(k + next.k, tk, dims.dk, next.ldk);
        prefetch_block(v + next.v, tk, dims.dv, next.ldv);
      }
      float* p = probs + tile.first_row * tk;  // the tile's P [Tq, Tk]
      // S = q k^T / sqrt(dk), then P = softmax over each query's visible keys (0 on the others).
      transpose_rows(k + tile.k, tk, dims.dk, tile.ldk, ld, k_t.data());
      dots_with_transposed(q + tile.q, tile.ldq, tq, k_t.data(), ld, dims.dk, tk, alpha, p, tk);
      for (int64_t t = 0; t < tq; ++t) {
        const int64_t n = mask.visible_keys(tile.b, t, tk);
        softmax_row(p + t * tk, p + t * tk, n);
        std::fill(p + t * tk + n, p + (t + 1) * tk, 0.0f);
      }
      // O = D v with D = P, or P * keep / (1 - p) under dropout (kept in `dropped`).
      const float* weights = p;
      if (dropout.p > 0.0f) {
        float* d = dropped + tile.first_row * tk;
        for (int64_t t = 0; t < tq; ++t)
          drop_row(dropout, tile.first_row + t, tk, p + t * tk, d + t * tk);
        weights = d;
      }
      weighted_rows(weights, tk, 1, tq, tk, v + tile.v, tile.ldv, dims.dv, out + tile.o, tile.ldo,
                    false);
    }
  }
}

void attention_backward(const AttentionDims& dims, const AttentionMaskSpec& mask,
                        const AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* probs, const float* d_out, float* d_probs,
                        const AttentionGrads& grads) {
  const int64_t tq = dims.tq, tk = dims.tk, dk = dims.dk, dv = dims.dv;
  const int64_t ld = round_up_to_lanes(tk);
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dk));
  const bool has_dropout = dropout.p > 0.0f;
  const float keep_scale = has_dropout ? 1.0f / (1.0f - dropout.p) : 1.0f;
  const int64_t tiles = dims.batch * dims.heads;
#pragma omp parallel if (worth_threads(dims))
  {
    std::vector<float> v_t(static_cast<size_t>(dv * ld));  // the tile's values, transposed
    std::vector<float> dropped(has_dropout ? static_cast<size_t>(tq * tk) : 0);
#pragma omp for schedule(static)
    for (int64_t index = 0; index < tiles; ++index) {
      const Tile tile = tile_of(dims, index);
      if (index + 1 < tiles) {
        const Tile next = tile_of(dims, index + 1);
        prefetch_block(q + next.q, tq, dk, next.ldq);
        prefetch_block(k + next.k, tk, dk, next.ldk);
        prefetch_block(v + next.v, tk, dv, next.ldv);
        prefetch_block(d_out + next.o, tq, dv, next.ldo);
        prefetch_block(probs + next.first_row * tk, tq, tk, tk);
      }
      const float* p = probs + tile.first_row * tk;  // the tile's P [Tq, Tk]
      const float* g = d_out + tile.o;               // dO row t: g + t * ldo
      float* ds = d_probs + tile.first_row * tk;     // the tile's dS [Tq, Tk]
      // O = D v with D = P * keep / (1 - p) (P without dropout).
      const float* d = p;
      if (has_dropout) {
        for (int64_t t = 0; t < tq; ++t)
          drop_row(dropout, tile.first_row + t, tk, p + t * tk, &dropped[t * tk]);
        d = dropped.data();
      }
      // Written in the order dv, dq, dk (AttentionGrads): where one tensor was several inputs, its
      // targets accumulate in that order. Tiles own disjoint rows and columns of each.
      // dv = D^T dO: key j's row is the sum over queries t of D_tj dO_t.
      if (grads.dv)
        weighted_rows(d, 1, tk, tk, tq, g, tile.ldo, dv, grads.dv + tile.v, tile.ldv,
                      grads.accumulate_v);
      if (!grads.dq && !grads.dk) continue;
      // dD = dO v^T;  dP = dD * keep / (1 - p);  P = softmax(S): dS_j = P_j (dP_j - sum_i dP_i
      // P_i), 0 on masked keys;  S = alpha q k^T: alpha = 1/sqrt(dk) is folded into dS.
      transpose_rows(v + tile.v, tk, dv, tile.ldv, ld, v_t.data());
      dots_with_transposed(g, tile.ldo, tq, v_t.data(), ld, dv, tk, 1.0f, ds, tk);
      for (int64_t t = 0; t < tq; ++t) {
        const int64_t n = mask.visible_keys(tile.b, t, tk);
        const float* p_row = p + t * tk;
        float* dp = ds + t * tk;
        // D_tj is 0 where the element was dropped, or where P_tj is 0 (and so dS_tj is 0).
        if (has_dropout)
          for (int64_t j = 0; j < n; ++j) dp[j] = d[t * tk + j] != 0.0f ? dp[j] * keep_scale : 0.0f;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < n; ++j) dot += dp[j] * p_row[j];
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) dp[j] = alpha * p_row[j] * (dp[j] - dot);
        std::fill(dp + n, dp + tk, 0.0f);
      }
      // dq = dS k;  dk = dS^T q.
      if (grads.dq)
        weighted_rows(ds, tk, 1, tq, tk, k + tile.k, tile.ldk, dk, grads.dq + tile.q, tile.ldq,
                      grads.accumulate_q);
      if (grads.dk)
        weighted_rows(ds, 1, tk, tk, tq, q + tile.q, tile.ldq, dk, grads.dk + tile.k, tile.ldk,
                      grads.accumulate_k);
    }
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
