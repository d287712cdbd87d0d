// The loops around a blocked kernel's micro-kernel, shared by the f32 kernel (blocked_gemm_cpu.cc)
// and the bf16 one (blocked_gemm_bf16_cpu.cc), in the BLIS order: for each block of b's columns
// (kNc) and depth (kKc), pack b's block; for each block of a's rows (kMc), pack a's block; then
// every kMr x kNr tile of c from a's micro-panel (in L1) and b's (streaming from L2).
//
// A Kernel type gives:
//   Source, Packed       the operands' element type and the packed one (4 bytes: a float, or a
//                        pair of bf16 along the depth)
//   kMr, kNr, kKc, kMc, kNc
//   packed_depth(depth)  packed elements per row of a micro-panel for `depth` depths
//   pack_a(a, rows, depth, out), pack_b(b, depth, cols, out)   micro-panels of kMr rows / kNr
//                        columns, each [packed_depth][kMr or kNr], past the edges zero
//   micro_kernel(packed_depth, a_panel, b_panel, c, ldc, rows, columns, epilogue)
// Also the vector helpers both packers use. Internal to kernels/cpu: included only where AVX-512 is
// compiled.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/integer_math.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/cpu/thread_shares.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {
namespace blocked {

// A product's result rounded to bf16 instead of written to an f32 c (a product of one depth
// block, so that each tile's sum is whole when it is stored). Each pointer is at the first element
// of the block or tile it describes; c and relu_mask have rows ldc apart.
struct RoundedOutput {
  uint16_t* c = nullptr;                // the result, rounded as f32_to_bf16_bits; null: none
  const uint16_t* relu_mask = nullptr;  // bf16: each result kept where its element > 0, else 0
  float* column_sums = nullptr;         // (+)= the (masked) results' column sums, rows in order

  RoundedOutput at(int64_t row, int64_t col, int64_t ldc) const {
    return {c ? c + row * ldc + col : nullptr, relu_mask ? relu_mask + row * ldc + col : nullptr,
            column_sums ? column_sums + col : nullptr};
  }
};

// What a tile does with its sums: add them to c (a later depth block, or `accumulate`) or write
// them, add the bias (first depth block), apply ReLU (last); or, with rounded.c, the result goes
// to bf16 there (RoundedOutput) and not to c.
struct Epilogue {
  bool load_c;
  const float* bias;  // at the tile's first column, or null
  bool relu;
  RoundedOutput rounded;  // at the tile's first element
};

// f32_to_bf16_bits of 16 lanes: round to nearest even on the bit pattern, NaNs made quiet. (The
// zero-masked shifts with every lane set: GCC 12 warns of the plain form's undefined register.)
inline __m512i f32_to_bf16_bits_16(__m512 value) {
  constexpr __mmask16 kAll = 0xffff;
  const __m512i u = _mm512_castps_si512(value);
  const __m512i high = _mm512_maskz_srli_epi32(kAll, u, 16);
  const __m512i lowest_kept = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_maskz_srli_epi32(
      kAll, _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lowest_kept), 16);
  const __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_blend_epi32(nan, rounded, quiet_nan);
}

// The lanes [0, count) of 16, any count.
inline __mmask16 lanes(int64_t count) {
  return first_lanes(std::clamp<int64_t>(count, 0, 16));
}

// r[i] = column i of the 16 x 16 block whose rows were r[0..15] (the usual three rounds of
// shuffles: pairs of elements, then of pairs, then 128-bit lanes twice). The zero-masked forms with
// every lane set: GCC 12 warns of the plain forms' undefined pass-through register.
inline void transpose_16x16(__m512 r[16]) {
  constexpr __mmask16 kAll = 0xffff;
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_maskz_shuffle_f32x4(kAll, r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_maskz_shuffle_f32x4(kAll, r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[i], t[i + 8], 0xDD);
  }
}

// c's tile is needed only at the end: its lines arrive while the sums run.
inline void prefetch_tile(const float* c, int64_t ldc, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
  }
}

// The tile's 32 columns of the bias (masked to the tile's columns), or zeros.
inline void load_tile_bias(const Epilogue& epilogue, const __mmask16 (&masks)[2],
                           __m512 (&bias)[2]) {
  for (int v = 0; v < 2; ++v)
    bias[v] = epilogue.bias ? _mm512_maskz_loadu_ps(masks[v], epilogue.bias + 16 * v)
                            : _mm512_setzero_ps();
}

// c's tile [rows][columns] (rows <= kMr, columns <= 32) from the sums of its kMr x 32 elements,
// with the epilogue, into the f32 c.
template <int kMr>
__attribute__((always_inline)) inline void store_f32_tile(const __m512 (&acc)[kMr][2], float* c,
                                                          int64_t ldc, int64_t rows,
                                                          int64_t columns,
                                                          const Epilogue& epilogue) {
  const __mmask16 masks[2] = {lanes(columns), lanes(columns - 16)};
  __m512 bias[2];
  load_tile_bias(epilogue, masks, bias);
#pragma GCC unroll 16
  for (int r = 0; r < kMr; ++r) {
    if (r >= rows) break;
    for (int v = 0; v < 2; ++v) {
      float* out = c + r * ldc + 16 * v;
      __m512 sum = _mm512_add_ps(acc[r][v], bias[v]);
      if (epilogue.load_c) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(masks[v], out));
      // max(0, sum) in this order: vmaxps returns its second operand when either is NaN.
      if (epilogue.relu) sum = _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), sum);
      _mm512_mask_storeu_ps(out, masks[v], sum);
    }
  }
}

// The same tile rounded to bf16 (RoundedOutput; a sum of one depth block: nothing to load).
template <int kMr>
__attribute__((always_inline)) inline void store_rounded_tile(const __m512 (&acc)[kMr][2],
                                                              int64_t ldc, int64_t rows,
                                                              int64_t columns,
                                                              const Epilogue& epilogue) {
  const __mmask16 masks[2] = {lanes(columns), lanes(columns - 16)};
  __m512 bias[2];
  load_tile_bias(epilogue, masks, bias);
  const RoundedOutput& rounded = epilogue.rounded;
  __m512 column_sums[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  if (rounded.column_sums)
    for (int v = 0; v < 2; ++v)
      column_sums[v] = _mm512_maskz_loadu_ps(masks[v], rounded.column_sums + 16 * v);
  for (int r = 0; r < kMr; ++r) {
    if (r >= rows) break;
    for (int v = 0; v < 2; ++v) {
      __m512 sum = _mm512_add_ps(acc[r][v], bias[v]);
      if (epilogue.relu) sum = _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), sum);
      if (rounded.relu_mask) {
        // A bf16 is its f32's high half; > 0 is false for a NaN.
        const __m512i mask_bits = _mm512_maskz_slli_epi32(
            0xffff,
            _mm512_maskz_cvtepu16_epi32(
                0xffff, _mm256_maskz_loadu_epi16(masks[v], rounded.relu_mask + r * ldc + 16 * v)),
            16);
        sum = _mm512_maskz_mov_ps(
            _mm512_cmp_ps_mask(_mm512_castsi512_ps(mask_bits), _mm512_setzero_ps(), _CMP_GT_OQ),
            sum);
      }
      if (rounded.column_sums) column_sums[v] = _mm512_add_ps(column_sums[v], sum);
      _mm512_mask_cvtepi32_storeu_epi16(rounded.c + r * ldc + 16 * v, masks[v],
                                        f32_to_bf16_bits_16(sum));
    }
  }
  if (rounded.column_sums)
    for (int v = 0; v < 2; ++v)
      _mm512_mask_storeu_ps(rounded.column_sums + 16 * v, masks[v], column_sums[v]);
}

// The tile into c, or rounded (epilogue.rounded.c): one test a tile, so that the f32 stores keep
// the unrolled loop they had before there were rounded ones, with no branch on them inside it.
template <int kMr>
__attribute__((always_inline)) inline void store_tile(const __m512 (&acc)[kMr][2], float* c,
                                                      int64_t ldc, int64_t rows, int64_t columns,
                                                      const Epilogue& epilogue) {
  if (epilogue.rounded.c)
    store_rounded_tile(acc, ldc, rows, columns, epilogue);
  else
    store_f32_tile(acc, c, ldc, rows, columns, epilogue);
}

// The packers of a's columns (a = g^T, contiguous along g's rows) read each depth's piece of a
// column from the next row of g, a whole row further on (1 KiB for base's 512 columns in bf16):
// under perf, those loads held 11% of a 4096-token weight gradient's samples. They ask for the
// piece kPackAheadDepths depths ahead as well (those weight gradients 1.05-1.15x in bf16,
// docs/journal/2026-12-03-zen5-suite-and-packing-prefetch.md). The packers of b's rows (the weight
// gradients' x) read a row a whole row apart from the last, and ask for the row kPackAheadDepths
// further on (docs/journal/2026-12-04-packing-prefetch-rows.md).
inline constexpr int64_t kPackAheadDepths = 16;

// The cache lines of p[0, count) into L1 (a hint: an address past the end never faults).
template <class T>
inline void prefetch_span(const T* p, int64_t count) {
  const char* begin = reinterpret_cast<const char*>(p);
  const char* end = reinterpret_cast<const char*>(p + count);
  for (const char* at = begin; at < end; at += 64) _mm_prefetch(at, _MM_HINT_T0);
  _mm_prefetch(end - 1, _MM_HINT_T0);  // the last line, when begin is not at a line's start
}

// The packers of a's rows (the forward's x, the input gradients' g: a micro-panel's 14 rows a whole
// row apart) read 16 depths of each row at a time, and a panel's rows are new streams to the
// hardware's prefetchers: each block of 16 depths asks for the next panel's rows at those depths
// (`count` lines, `stride` elements apart), a panel's time ahead of their use (gemm_bench
// training_product_f32 and _bf16: docs/journal/2026-12-04-packing-prefetch-rows.md).
template <class T>
inline void prefetch_rows(const T* p, int64_t stride, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    _mm_prefetch(reinterpret_cast<const char*>(p + i * stride), _MM_HINT_T0);
}

template <class T>
T* aligned_64(std::vector<T>& buffer, size_t count) {
  buffer.resize(count + 64 / sizeof(T));
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t{63});
}

// The whole product for rows [0, m) and columns [0, n) of the given views, on this thread, with
// its own packed blocks; into c, or (rounded.c set, c null) rounded to bf16 (k <= kKc, no
// accumulate). (Threads that packed each block of b together and waited for one another
// ran no faster: docs/journal/2026-11-27-blocked-f32-kernel.md.)
template <class Kernel>
void gemm_block(int64_t m, int64_t n, int64_t k, Strided<typename Kernel::Source> a,
                Strided<typename Kernel::Source> b, const float* bias, bool accumulate, bool relu,
                float* c, int64_t ldc, RoundedOutput rounded) {
  using Packed = typename Kernel::Packed;
  thread_local std::vector<Packed> a_buffer, b_buffer;
  Packed* a_packed = aligned_64(a_buffer, Kernel::kMc * Kernel::packed_depth(Kernel::kKc));
  Packed* b_packed = aligned_64(b_buffer, Kernel::kNc * Kernel::packed_depth(Kernel::kKc));
  for (int64_t j0 = 0; j0 < n; j0 += Kernel::kNc) {
    const int64_t cols = std::min(Kernel::kNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += Kernel::kKc) {
      const int64_t depth = std::min(Kernel::kKc, k - p0), packed = Kernel::packed_depth(depth);
      Kernel::pack_b({b.data + p0 * b.row_stride + j0 * b.col_stride, b.row_stride, b.col_stride},
                     depth, cols, b_packed);
      for (int64_t i0 = 0; i0 < m; i0 += Kernel::kMc) {
        const int64_t rows = std::min(Kernel::kMc, m - i0);
        Kernel::pack_a({a.data + i0 * a.row_stride + p0 * a.col_stride, a.row_stride, a.col_stride},
                       rows, depth, a_packed);
        // a's micro-panel stays in L1 while b's block streams from L2 under it.
        for (int64_t ir = 0; ir < rows; ir += Kernel::kMr) {
          const Packed* a_panel = a_packed + ir * packed;
          for (int64_t jr = 0; jr < cols; jr += Kernel::kNr) {
            const int64_t tile = (i0 + ir) * ldc + j0 + jr;
            const Epilogue epilogue{p0 > 0 || accumulate,
                                    p0 == 0 && bias ? bias + j0 + jr : nullptr,
                                    relu && p0 + depth == k, rounded.at(i0 + ir, j0 + jr, ldc)};
            Kernel::micro_kernel(
                packed, a_panel, b_packed + jr * packed, rounded.c ? nullptr : c + tile, ldc,
                std::min(Kernel::kMr, rows - ir), std::min(Kernel::kNr, cols - jr), epilogue);
          }
        }
      }
    }
  }
}

// c = a b (+ bias) (+ c) (ReLU) on all threads (or on this one inside a parallel region); `name`
// for the errors of its arguments. With rounded.c (and c null) the result goes to bf16 instead
// (RoundedOutput): k at most kKc, no accumulate; with its column sums, the threads split c's
// columns only, so that each column's rows are added in order by one thread.
template <class Kernel>
void product(const char* name, int64_t m, int64_t n, int64_t k, Strided<typename Kernel::Source> a,
             Strided<typename Kernel::Source> b, const float* bias, bool accumulate, bool relu,
             float* c, int64_t ldc, RoundedOutput rounded = {}) {
  TFM_CHECK(!rounded.c || (!c && !accumulate && k <= Kernel::kKc),
            "{}: a bf16 c needs one depth block (k {} of at most {}) and no accumulation", name, k,
            Kernel::kKc);
  TFM_CHECK(a.row_stride == 1 || a.col_stride == 1, "{}: a has no unit stride", name);
  TFM_CHECK(b.row_stride == 1 || b.col_stride == 1, "{}: b has no unit stride", name);
  if (m == 0 || n == 0) return;
  TFM_CHECK(k > 0, "{}: an empty inner dimension", name);
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Threads split c into a grid of rows_split x (threads / rows_split) blocks, each a whole product
  // of its own. The split minimises a block's cost in units of k: rows x cols multiply-adds plus
  // (rows + cols) packed elements, each weighed as 8 multiply-adds (an estimate, not measured per
  // split; among splits of equal work it takes the one that packs less). Column sums: columns only.
  int rows_split = 1;
  double best = -1;
  for (int split = 1; split <= (rounded.column_sums ? 1 : threads); ++split) {
    if (threads % split) continue;
    const double block_rows = static_cast<double>(round_up(ceil_div(m, split), Kernel::kMr));
    const double block_cols =
        static_cast<double>(round_up((n + threads / split - 1) / (threads / split), Kernel::kNr));
    const double cost = block_rows * block_cols + 8.0 * (block_rows + block_cols);
    if (best < 0 || cost < best) best = cost, rows_split = split;
  }
  const int cols_split = threads / rows_split;
  if (threads == 1) {
    gemm_block<Kernel>(m, n, k, a, b, bias, accumulate, relu, c, ldc, rounded);
    return;
  }
  // The blocks' bounds: a dimension split between all the threads (always one of the two on 2
  // threads) is split by their measured rates (thread_shares.h); a grid of both splits stays even.
  ThreadShares& shares = product_thread_shares();
  const bool one_dimension = rows_split == threads || cols_split == threads;
  auto split = [&](int parts, int64_t size, int64_t grain) {
    std::vector<int64_t> bounds(static_cast<size_t>(parts) + 1);
    if (parts == threads) {
      shares.bounds(threads, size, grain, bounds.data());
    } else {
      const int64_t part = round_up(ceil_div(size, parts), grain);
      for (int i = 0; i <= parts; ++i) bounds[static_cast<size_t>(i)] = std::min(size, i * part);
    }
    return bounds;
  };
  const std::vector<int64_t> row_bounds = split(rows_split, m, Kernel::kMr),
                             col_bounds = split(cols_split, n, Kernel::kNr);
  std::vector<double> work(static_cast<size_t>(threads)), seconds(static_cast<size_t>(threads));
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int block = 0; block < threads; ++block) {
    const size_t r = static_cast<size_t>(block / cols_split),
                 col = static_cast<size_t>(block % cols_split);
    const int64_t i0 = row_bounds[r], i1 = row_bounds[r + 1];
    const int64_t j0 = col_bounds[col], j1 = col_bounds[col + 1];
    if (i0 >= i1 || j0 >= j1) continue;
    const double start = omp_get_wtime();
    gemm_block<Kernel>(
        i1 - i0, j1 - j0, k, {a.data + i0 * a.row_stride, a.row_stride, a.col_stride},
        {b.data + j0 * b.col_stride, b.row_stride, b.col_stride}, bias ? bias + j0 : nullptr,
        accumulate, relu, rounded.c ? nullptr : c + i0 * ldc + j0, ldc, rounded.at(i0, j0, ldc));
    seconds[static_cast<size_t>(block)] = omp_get_wtime() - start;
    work[static_cast<size_t>(block)] = static_cast<double>((i1 - i0) * (j1 - j0));
  }
  if (one_dimension) shares.record(threads, work.data(), seconds.data());
}

}  // namespace blocked
}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
