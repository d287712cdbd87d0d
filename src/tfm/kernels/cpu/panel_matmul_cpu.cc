#include "tfm/kernels/cpu/panel_matmul_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tfm/core/error.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace tfm::cpu {

#ifdef __AVX512F__

namespace {

constexpr int kVectors = kPanelColumns / 16;  // a panel's row: 4 registers of 16 lanes
// The slice of a panel that stays in L1 while every row of x passes over it: 64 x 64 x 4 B = 16
// KiB.
constexpr int64_t kDepth = 64;
// Rows of x per tile: 6 x 4 accumulators, 4 weight registers and a broadcast fit the 32 registers.
constexpr int kTileRows = 6;

struct Panel {
  const float* weights;  // [kp][64]: this panel of W^T
  __mmask16
      masks[kVectors];  // which of each register's 16 columns exist (the last panel's may not)
  const float* bias;    // at the panel's first column, or null
};

// sum[r][c] (+)= sum over k in [k0, k1) of x[r][k] w[k][c] for MR rows of x (ldx apart) and the
// panel's 64 columns. The first slice starts from the bias (or 0), the others from `partial`
// ([MR][64], contiguous); the last writes y and applies ReLU, the others write `partial`. (Partial
// sums kept in y itself, whose rows lie 2 or 8 KiB apart, would share a few sets of L1 and evict
// the weights' slice.) With kPrefetch (the slice's first tile), each k also fetches the same row of
// the next slice (the next panel's first, after the last) into L1, so that the weights stream in
// while this slice runs; a prefetch past the weight's end is a hint and never faults.
template <int MR, bool kPrefetch = false>
inline void tile(const float* x, int64_t ldx, const Panel& panel, int64_t k0, int64_t k1,
                 float* partial, float* y, int64_t ldy, bool first, bool last, bool relu) {
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
    __m512 wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      wv[v] = _mm512_loadu_ps(w + 16 * v);
      if constexpr (kPrefetch)
        _mm_prefetch(reinterpret_cast<const char*>(w + kDepth * kPanelColumns + 16 * v),
                     _MM_HINT_T0);
    }
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
      if (relu) out = _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), out);
      _mm512_mask_storeu_ps(y + r * ldy + 16 * v, panel.masks[v], out);
    }
}

using TileFunction = void (*)(const float*, int64_t, const Panel&, int64_t, int64_t, float*, float*,
                              int64_t, bool, bool, bool);
constexpr TileFunction kTailTiles[kTileRows] = {nullptr,  &tile<1>, &tile<2>,
                                                &tile<3>, &tile<4>, &tile<5>};

float* aligned_64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// Rows [r0, r1) of y over one panel (r0 a multiple of kTileRows): slice by slice, every tile of
// rows over the slice while it is in L1.
void panel_rows(const float* x, int64_t k, const Panel& panel, int64_t r0, int64_t r1, float* y,
                int64_t ldy, bool relu) {
  // The partial sums of these rows, [r1 - r0][64].
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>((r1 - r0) * kPanelColumns + 16));
  float* partial_sums = aligned_64(buffer.data());
  for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
    const int64_t k1 = std::min(k, k0 + kDepth);
    const bool first = k0 == 0, last = k1 == k;
    int64_t r = r0;
    if (r + kTileRows <= r1) {
      tile<kTileRows, true>(x + r * k, k, panel, k0, k1, partial_sums, y + r * ldy, ldy, first,
                            last, relu);
      r += kTileRows;
    }
    for (; r + kTileRows <= r1; r += kTileRows)
      tile<kTileRows>(x + r * k, k, panel, k0, k1, partial_sums + (r - r0) * kPanelColumns,
                      y + r * ldy, ldy, first, last, relu);
    // The last 1-5 rows: one call a slice, through a table of the tile's instances.
    if (r < r1)
      kTailTiles[r1 - r](x + r * k, k, panel, k0, k1, partial_sums + (r - r0) * kPanelColumns,
                         y + r * ldy, ldy, first, last, relu);
  }
}

}  // namespace

bool panel_kernel_available() {
  return true;
}

void panel_linear_f32(const float* x, int64_t m, int64_t n, int64_t k, const float* panels,
                      const float* bias, bool relu, float* y) {
  if (m == 0) return;
  const int64_t panel_count = (n + kPanelColumns - 1) / kPanelColumns;
  const int64_t kp = (k + kPanelDepthBlock - 1) / kPanelDepthBlock * kPanelDepthBlock;
  auto panel_at = [&](int64_t p) {
    Panel panel{panels + p * kp * kPanelColumns, {}, bias ? bias + p * kPanelColumns : nullptr};
    for (int v = 0; v < kVectors; ++v) {
      const int64_t columns = std::clamp<int64_t>(n - p * kPanelColumns - 16 * v, 0, 16);
      panel.masks[v] = static_cast<__mmask16>((1u << columns) - 1u);
    }
    return panel;
  };
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Work items: panels, and when there are fewer panels than threads, row ranges of each (whole
  // tiles), so that every thread streams its own part of the weight.
  int64_t row_chunks = 1;
  if (panel_count < threads) {
    const int64_t tiles = (m + kTileRows - 1) / kTileRows;
    row_chunks = std::min<int64_t>(tiles, (threads + panel_count - 1) / panel_count);
  }
  const int64_t chunk_rows =
      ((m + row_chunks - 1) / row_chunks + kTileRows - 1) / kTileRows * kTileRows;
  row_chunks = (m + chunk_rows - 1) / chunk_rows;
  const int64_t items = panel_count * row_chunks;
  auto run = [&](int64_t item) {
    const int64_t p = item / row_chunks, chunk = item % row_chunks;
    const int64_t r0 = chunk * chunk_rows, r1 = std::min(m, r0 + chunk_rows);
    panel_rows(x, k, panel_at(p), r0, r1, y + p * kPanelColumns, n, relu);
  };
  if (threads == 1) {
    for (int64_t item = 0; item < items; ++item) run(item);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < items; ++item) run(item);
}

#else  // no AVX-512: PackedWeight keeps oneDNN's products

bool panel_kernel_available() {
  return false;
}

void panel_linear_f32(const float*, int64_t, int64_t, int64_t, const float*, const float*, bool,
                      float*) {
  fail("panel_linear_f32: this build has no AVX-512 (panel_kernel_available() is false)");
}

#endif

}  // namespace tfm::cpu
