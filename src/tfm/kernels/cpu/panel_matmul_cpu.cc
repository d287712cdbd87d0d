#include "tfm/kernels/cpu/panel_matmul_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/integer_math.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/scratch.h"
#include "tfm/kernels/cpu/stealing_ranges.h"
#include "tfm/kernels/cpu/thread_shares.h"
#include "tfm/kernels/cpu/vector_math.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

#ifdef __AVX512F__

namespace {

constexpr int kVectors = kPanelColumns / 16;  // a panel's row: 4 registers of 16 lanes
// The depths of a panel that every tile of rows passes over before the next (a slice), and how
// far ahead the tiles prefetch the weights (panel_rows):
// - Products of at least kDeepSlicesTiles tiles: 256-deep slices (64 KiB, read from L2 by each
//   tile), prefetched one slice ahead. A tile keeps its sums in registers for the whole slice and
//   moves them through memory only between slices (24 loads and 24 stores); with 64-deep slices,
//   which stay in L1, it did so four times as often, and a greedy f32 decode of 32 sentences ran
//   1.05-1.08x slower, beam 4 1.06-1.08x, on a Zen 5
//   (docs/journal/2026-12-06-panel-slices-from-l2.md).
// - Fewer tiles (up to 18 rows: one sentence's decoding steps, greedy or beam 4, or a few): 64-deep
//   slices in L1, prefetched two ahead (32 KiB). A tile of few rows does few multiply-adds per
//   weight it loads, and from L2 it waits on L2's rate: 8 rows (a tile of 6 and one of 2) ran
//   0.86x as fast with 256-deep slices, 16 rows the same within the noise.
struct Slices {
  int64_t depth, ahead;
};
constexpr Slices kDeepSlices{256, 1}, kL1Slices{64, 2};
constexpr int64_t kDeepSlicesTiles = 4;

// Rows of x per tile: 6 x 4 accumulators, 4 weight registers and a broadcast fit the 32 registers.
constexpr int kTileRows = 6;
constexpr int64_t kLineFloats = 16;  // a cache line: 64 bytes

struct Panel {
  const float* weights;  // [kp][64]: this panel of W^T
  __mmask16
      masks[kVectors];  // which of each register's 16 columns exist (the last panel's may not)
  const float* bias;    // at the panel's first column, or null
};

// sum[r][c] (+)= sum over k in [k0, k1) of x[r][k] w[k][c] for MR rows of x (ldx apart) and the
// panel's 64 columns. The first slice starts from the bias (or 0), the others from `partial`
// ([MR][64], contiguous); the last writes y and applies `post`, the others write `partial`.
// (Partial sums kept in y itself, whose rows lie 2 or 8 KiB apart, would share a few sets of L1 and
// evict the weights' slice.) With `prefetch`, each k also asks for the next `prefetch_lines` cache
// lines from there into L2 (panel_rows gives each tile its share of a later slice).
template <int MR>
inline void tile(const float* x, int64_t ldx, const Panel& panel, int64_t k0, int64_t k1,
                 float* partial, float* y, int64_t ldy, bool first, bool last, kernels::PostOp post,
                 const float* prefetch, int prefetch_lines) {
  __m512 acc[MR][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      acc[r][v] = first ? (panel.bias ? _mm512_maskz_loadu_ps(panel.masks[v], panel.bias + 16 * v)
                                      : _mm512_setzero_ps())
                        : _mm512_load_ps(partial + r * kPanelColumns + 16 * v);
  const float* w = panel.weights + k0 * kPanelColumns;
  for (int64_t k = k0; k < k1; ++k, w += kPanelColumns) {
    if (prefetch != nullptr)
      for (int line = 0; line < prefetch_lines; ++line, prefetch += kLineFloats)
        _mm_prefetch(reinterpret_cast<const char*>(prefetch), _MM_HINT_T1);
    __m512 wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_ps(w + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * ldx + k]);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(a, wv[v], acc[r][v]);
    }
  }
  if (!last) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v)
        _mm512_store_ps(partial + r * kPanelColumns + 16 * v, acc[r][v]);
    return;
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      __m512 out = acc[r][v];
      // max(0, out) in this order: vmaxps returns its second operand when either is NaN. (The
      // zero-masked form: GCC 12 warns of _mm512_max_ps's undefined pass-through register.)
      if (post == kernels::PostOp::relu)
        out = _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), out);
      else
        out = smooth_activation16(post, out);
      _mm512_mask_storeu_ps(y + r * ldy + 16 * v, panel.masks[v], out);
    }
}

using TileFunction = void (*)(const float*, int64_t, const Panel&, int64_t, int64_t, float*, float*,
                              int64_t, bool, bool, kernels::PostOp, const float*, int);
constexpr TileFunction kTiles[kTileRows + 1] = {nullptr,  &tile<1>, &tile<2>, &tile<3>,
                                                &tile<4>, &tile<5>, &tile<6>};

float* aligned_64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// Asks for the slice of `rows` rows of x (ldx apart) that their tile multiplies next, columns
// [k0, k0 + depth) (k0 0: the next panel's first), into L2. In a decoding step x is the previous
// op's output, part of it written by the other cores, and a tile reads it with the stride of a
// whole row, which the hardware's prefetchers do not follow: without this, a thread's first panel
// waits on a miss for each line of x that another core wrote (x that does not stay in L2: each
// panel's).
void prefetch_x_slice(const float* x, int64_t ldx, int64_t rows, int64_t k0, int64_t depth) {
  const int64_t end = std::min(ldx, k0 + depth);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = k0; c < end; c += kLineFloats)
      _mm_prefetch(reinterpret_cast<const char*>(x + r * ldx + c), _MM_HINT_T1);
}

// The largest x that stays in L2 from one panel to the next beside the streamed weights (the
// smallest L2 of the CPUs measured: 1 MiB). Above it (the feed-forward's second product, 128 rows
// of 2048: 1 MiB) every panel prefetches x; below, only a thread's first: a prefetch of lines
// already in the caches only takes room in L1 from the slice in use (the output layer's one-thread
// blocks, whose x stays in L1 and L2, were 6% slower with it).
constexpr int64_t kXStaysInL2Bytes = 512 << 10;

// Rows [r0, r1) of y over one panel (r0 a multiple of kTileRows): slice by slice, every tile of
// rows over the slice while it is in the caches (L2 or L1: Slices).
//
// The weights stream in from memory when they do not fit in the caches: a decoding step reads
// all of a model's (153 MB for `base` in f32), and each is used once per step. The hardware's
// prefetchers alone do not keep up, since a slice is read from memory by its first tile only and
// then again from the caches: the memory is busy for a sixth of the slice's time and idle for the
// rest. So the slice's tiles share out the prefetching of the slice `Slices::ahead` slices on
// (into the next panel after the last), a few lines per k, into L2: the requests are spread evenly
// over the slice's time, faster than the first tile prefetching the next slice into L1 (gemm_bench
// decoder_step_f32 measures it: docs/journal/2026-11-27-decode-weights-streamed.md). A single row
// reads each slice once, at the memory's pace, and the hardware's prefetchers keep up: software
// prefetching only slowed it. A prefetch past the weight's end is a hint and never faults.
void panel_rows(const float* x, int64_t k, const Panel& panel, int64_t r0, int64_t r1, float* y,
                int64_t ldy, kernels::PostOp post, bool prefetch_x) {
  // The partial sums of these rows, [r1 - r0][64].
  thread_local std::vector<float> buffer;
  float* partial_sums =
      aligned_64(scratch(buffer, static_cast<size_t>((r1 - r0) * kPanelColumns + 16)));
  const int64_t tiles = (r1 - r0 + kTileRows - 1) / kTileRows;
  const Slices slices = tiles >= kDeepSlicesTiles ? kDeepSlices : kL1Slices;
  for (int64_t k0 = 0; k0 < k; k0 += slices.depth) {
    const int64_t k1 = std::min(k, k0 + slices.depth);
    const bool first = k0 == 0, last = k1 == k;
    // The lines of a slice as deep as this one, shared out among the tiles, `per_k` lines per k.
    const int64_t depth = k1 - k0, lines = depth * kPanelColumns / kLineFloats;
    const int per_k = static_cast<int>((lines + tiles * depth - 1) / (tiles * depth));
    const float* ahead = panel.weights + (k0 + slices.ahead * slices.depth) * kPanelColumns;
    int64_t given = 0;  // lines given out so far
    for (int64_t r = r0; r < r1; r += kTileRows, given += depth * per_k) {
      const int64_t rows = std::min<int64_t>(kTileRows, r1 - r);
      const bool prefetching = r1 - r0 > 1 && given < lines;
      if (prefetch_x) prefetch_x_slice(x + r * k, k, rows, last ? 0 : k1, slices.depth);
      kTiles[rows](x + r * k, k, panel, k0, k1, partial_sums + (r - r0) * kPanelColumns,
                   y + r * ldy, ldy, first, last, post,
                   prefetching ? ahead + given * kLineFloats : nullptr, per_k);
    }
  }
}

// The products' panels, one weight's after the other's, as one product's work items (see
// panel_linear_f32 and panel_linears_f32).
void run_panel_products(const float* x, int64_t m, int64_t k, const PanelLinearF32* products,
                        int count, kernels::PostOp post) {
  if (m == 0) return;
  // first_panel[j]: the first panel of product j among all the products' panels (at most 4).
  int64_t first_panel[4 + 1] = {0};
  for (int j = 0; j < count; ++j)
    first_panel[j + 1] = first_panel[j] + (products[j].n + kPanelColumns - 1) / kPanelColumns;
  const int64_t panel_count = first_panel[count];
  const int64_t kp = (k + kPanelDepthBlock - 1) / kPanelDepthBlock * kPanelDepthBlock;
  // Panel `all` of all the products': its weight, its columns' masks and bias, and where its
  // columns of y start.
  struct At {
    Panel panel;
    float* y;
    int64_t ldy;
  };
  auto panel_at = [&](int64_t all) {
    int j = 0;
    while (all >= first_panel[j + 1]) ++j;
    const PanelLinearF32& product = products[j];
    const int64_t p = all - first_panel[j];
    At at{{product.panels + p * kp * kPanelColumns,
           {},
           product.bias ? product.bias + p * kPanelColumns : nullptr},
          product.y + p * kPanelColumns,
          product.n};
    for (int v = 0; v < kVectors; ++v) {
      const int64_t columns = std::clamp<int64_t>(product.n - p * kPanelColumns - 16 * v, 0, 16);
      at.panel.masks[v] = static_cast<__mmask16>((1u << columns) - 1u);
    }
    return at;
  };
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Work items. Many rows: each thread's static_rows (parallel.h) of every panel, a chunk of rows
  // a thread. Else panels, and when there are fewer panels than threads, row ranges of each (whole
  // tiles), so that every thread streams its own part of the weight.
  const bool by_rows = threads > 1 && m >= kRowsPerThreadToSplitRows * threads;
  int64_t chunk_rows = ceil_div(m, threads);
  if (!by_rows) {
    const int64_t row_chunks =
        panel_count < threads
            ? std::min<int64_t>(ceil_div(m, kTileRows), ceil_div(threads, panel_count))
            : 1;
    chunk_rows = round_up(ceil_div(m, row_chunks), kTileRows);
  }
  const int64_t row_chunks = ceil_div(m, chunk_rows);
  const int64_t items = panel_count * row_chunks;
  auto run = [&](int64_t item, bool prefetch_x) {
    const int64_t p = by_rows ? item % panel_count : item / row_chunks;
    const int64_t chunk = by_rows ? item / panel_count : item % row_chunks;
    const int64_t r0 = chunk * chunk_rows, r1 = std::min(m, r0 + chunk_rows);
    const At at = panel_at(p);
    panel_rows(x, k, at.panel, r0, r1, at.y, at.ldy, post, prefetch_x);
  };
  // One thread (log_softmax_top's blocks, each thread its own): x stays in its caches.
  if (threads == 1) {
    for (int64_t item = 0; item < items; ++item) run(item, false);
    return;
  }
  // Contiguous ranges of items, a thread that runs out taking from the others' ends
  // (stealing_ranges.h): a decoding step's products are too short for a measured split to follow
  // a core that slows down.
  StealingRanges work(items, threads, product_thread_shares().measured());
  const bool x_leaves_l2 = m * k * static_cast<int64_t>(sizeof(float)) > kXStaysInL2Bytes;
#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
    bool first = true;
    for (int64_t item = work.next(thread); item >= 0; item = work.next(thread)) {
      run(item, first || x_leaves_l2);
      first = false;
    }
  }
}

}  // namespace

bool panel_kernel_available() {
  return true;
}

void panel_linear_f32(const float* x, int64_t m, int64_t n, int64_t k, const float* panels,
                      const float* bias, kernels::PostOp post, float* y) {
  const PanelLinearF32 product{panels, n, bias, y};
  run_panel_products(x, m, k, &product, 1, post);
}

void panel_linears_f32(const float* x, int64_t m, int64_t k, const PanelLinearF32* products,
                       int count) {
  TFM_CHECK(count >= 1 && count <= 4, "panel_linears_f32: {} weights (1 to 4)", count);
  run_panel_products(x, m, k, products, count, kernels::PostOp::none);
}

#else  // no AVX-512: PackedWeight keeps oneDNN's products

bool panel_kernel_available() {
  return false;
}

void panel_linear_f32(const float*, int64_t, int64_t, int64_t, const float*, const float*,
                      kernels::PostOp, float*) {
  fail("panel_linear_f32: this build has no AVX-512 (panel_kernel_available() is false)");
}

void panel_linears_f32(const float*, int64_t, int64_t, const PanelLinearF32*, int) {
  fail("panel_linears_f32: this build has no AVX-512 (panel_kernel_available() is false)");
}

#endif

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
