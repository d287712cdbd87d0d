#include "tfm/kernels/cpu/panel_int8_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "tfm/core/error.h"

#ifdef __AVX512BW__
#include <immintrin.h>
#endif

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// Bytes of one k group of a panel (64 columns x 4 k) and of a whole panel.
constexpr int64_t kGroupBytes = kInt8PanelColumns * kInt8PanelGroup;

int64_t groups(int64_t k) {
  return (k + kInt8PanelGroup - 1) / kInt8PanelGroup;
}

}  // namespace

int64_t int8_panel_bytes(int64_t n, int64_t k) {
  return (n + kInt8PanelColumns - 1) / kInt8PanelColumns * groups(k) * kGroupBytes;
}

void pack_int8_panels(const int8_t* q, int64_t n, int64_t k, int8_t* panels) {
  const int64_t kq = groups(k);
  std::memset(panels, 0, static_cast<size_t>(int8_panel_bytes(n, k)));
  // Column j's k-th value goes to panel j / 64, group k / 4, column j % 64, place k % 4.
  for (int64_t j = 0; j < n; ++j) {
    int8_t* panel = panels + j / kInt8PanelColumns * kq * kGroupBytes;
    const int64_t column = j % kInt8PanelColumns;
    for (int64_t i = 0; i < k; ++i)
      panel[i / kInt8PanelGroup * kGroupBytes + column * kInt8PanelGroup + i % kInt8PanelGroup] =
          q[j * k + i];
  }
}

#ifdef __AVX512BW__

namespace {

constexpr int kVectors = kInt8PanelColumns / 16;  // a group's 64 columns: 4 registers
// Rows per tile: 6 x 4 accumulators, 4 weight registers, the broadcast, the ones and a temporary
// fit the 32 registers (with VNNI, one instruction and neither of the last two).
constexpr int kTileRows = 6;

// Row r's activations k = 4g .. 4g+3 as one 32-bit word (zeros beyond k: the weights are zero
// there too).
inline int32_t group_word(const uint8_t* row, int64_t g, int64_t k) {
  int32_t word = 0;
  std::memcpy(&word, row + g * kInt8PanelGroup,
              static_cast<size_t>(std::min<int64_t>(kInt8PanelGroup, k - g * kInt8PanelGroup)));
  return word;
}

// acc rows [0, MR) (ldacc apart) of one panel's 64 columns (masks: which exist), from u's rows
// (k apart).
template <int MR>
void tile(const uint8_t* u, int64_t k, const int8_t* panel, const __mmask16* masks, int32_t* acc,
          int64_t ldacc) {
  const int64_t kq = groups(k), full = k / kInt8PanelGroup;
#ifndef __AVX512VNNI__
  const __m512i ones = _mm512_set1_epi16(1);
#endif
  __m512i sum[MR][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) sum[r][v] = _mm512_setzero_si512();
  const int8_t* w = panel;
  for (int64_t g = 0; g < kq; ++g, w += kGroupBytes) {
    __m512i wv[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_si512(w + 64 * v);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t word;
      if (g < full)
        std::memcpy(&word, u + r * k + g * kInt8PanelGroup, sizeof(word));
      else
        word = group_word(u + r * k, g, k);
      const __m512i a = _mm512_set1_epi32(word);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) {
#ifdef __AVX512VNNI__
        // vpdpbusd: the four u8 x s8 products summed into s32 without saturating (any u8).
        sum[r][v] = _mm512_dpbusd_epi32(sum[r][v], a, wv[v]);
#else
        sum[r][v] =
            _mm512_add_epi32(sum[r][v], _mm512_madd_epi16(_mm512_maddubs_epi16(a, wv[v]), ones));
#endif
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v)
      _mm512_mask_storeu_epi32(acc + r * ldacc + 16 * v, masks[v], sum[r][v]);
}

using TileFunction = void (*)(const uint8_t*, int64_t, const int8_t*, const __mmask16*, int32_t*,
                              int64_t);
constexpr TileFunction kTiles[kTileRows + 1] = {nullptr,  &tile<1>, &tile<2>, &tile<3>,
                                                &tile<4>, &tile<5>, &tile<6>};

}  // namespace

bool int8_panel_kernel_available() {
  return true;
}

void panel_product_u8s8(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                        int32_t* acc) {
  if (m == 0) return;
  const int64_t panel_count = (n + kInt8PanelColumns - 1) / kInt8PanelColumns;
  const int64_t panel_bytes = groups(k) * kGroupBytes;
  auto run = [&](int64_t p) {
    __mmask16 masks[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      const int64_t columns = std::clamp<int64_t>(n - p * kInt8PanelColumns - 16 * v, 0, 16);
      masks[v] = static_cast<__mmask16>((1u << columns) - 1u);
    }
    // Every tile of rows over this panel (more than 6 rows read it again, from L2).
    for (int64_t r = 0; r < m; r += kTileRows)
      kTiles[std::min<int64_t>(kTileRows, m - r)](u + r * k, k, panels + p * panel_bytes, masks,
                                                  acc + r * n + p * kInt8PanelColumns, n);
  };
  if (omp_in_parallel() || omp_get_max_threads() == 1) {
    for (int64_t p = 0; p < panel_count; ++p) run(p);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panel_count; ++p) run(p);
}

#else  // no AVX512BW: oneDNN's products

bool int8_panel_kernel_available() {
  return false;
}

void panel_product_u8s8(const uint8_t*, int64_t, int64_t, int64_t, const int8_t*, int32_t*) {
  fail("panel_product_u8s8: this build has no AVX512BW (int8_panel_kernel_available() is false)");
}

#endif

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
