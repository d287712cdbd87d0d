#include "tfm/kernels/cpu/panel_int8_cpu.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "tfm/core/error.h"
#include "tfm/core/integer_math.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/quantize_cpu.h"
#include "tfm/kernels/cpu/vector_math.h"

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

int64_t int8_panel_groups(int64_t k) {
  return groups(k);
}

int64_t onednn_int8_panel_groups(int64_t k) {
  constexpr int64_t kOneDnnBlock = 64;  // BA16a64b4a: k in blocks of 16 x 4, 16 groups each
  return (k + kOneDnnBlock - 1) / kOneDnnBlock * (kOneDnnBlock / kInt8PanelGroup);
}

int64_t int8_panel_bytes(int64_t n, int64_t k) {
  return (n + kInt8PanelColumns - 1) / kInt8PanelColumns * groups(k) * kGroupBytes;
}

bool int8_panel_kernel_exact_for(int32_t zero_point) {
#ifdef __AVX512VNNI__
  return int8_panel_kernel_available() &&
         (zero_point == kSaturatingZeroPoint || zero_point == kNativeZeroPoint);
#else
  return int8_panel_kernel_available() && zero_point == kSaturatingZeroPoint;
#endif
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

// sum[r][v] += rows' words x one group's 64 columns (w: the group's 4 x 64 bytes).
template <int MR, typename Word>
[[gnu::always_inline, gnu::optimize("no-tree-pre")]] inline void multiply_group(
    __m512i (&sum)[MR][kVectors], const int8_t* w, Word word) {
#ifndef __AVX512VNNI__
  const __m512i ones = _mm512_set1_epi16(1);
#endif
  __m512i wv[kVectors];
#pragma GCC unroll 4
  for (int v = 0; v < kVectors; ++v) wv[v] = _mm512_loadu_si512(w + 64 * v);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const __m512i a = _mm512_set1_epi32(word(r));
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

// A tile's share of the prefetching of the panel its thread multiplies next (run_panels): from
// `lines` on, `per_group` cache lines at each of the tile's first `groups` groups, into L2.
struct PanelAhead {
  const int8_t* lines = nullptr;  // null: none
  int64_t groups = 0;
  int per_group = 0;
};

// Tile `tile`'s share (of `tiles`, each over `groups` whole groups) of the lines of the panel at
// `next` (panel_bytes long; null: none): the lines in equal runs, tile by tile.
PanelAhead share_of_next(const int8_t* next, int64_t panel_bytes, int64_t tiles, int64_t tile,
                         int64_t groups) {
  if (next == nullptr) return {};
  const int64_t panel_lines = panel_bytes / 64, tile_lines = ceil_div(panel_lines, tiles);
  const int per_group = static_cast<int>(ceil_div(tile_lines, std::max<int64_t>(1, groups)));
  const int64_t from = std::min(panel_lines, tile * tile_lines);
  return {next + 64 * from, ceil_div(std::min(tile_lines, panel_lines - from), per_group),
          per_group};
}

// The sums of rows [0, MR) of one panel's 64 columns, from u's rows (k apart), handed to
// store(r, v, sum) for row r's columns 16v .. 16v+15. The whole groups of 4 k first, in a loop with
// nothing else in it but the tile's share of the prefetching (PanelAhead), then the last, partial
// group. GCC 12's partial redundancy elimination moves the 24 sums of a 6-row tile through the
// stack at every group (a load and a store per vpdpbusd, half the speed): without it they stay in
// registers.
template <int MR, typename Store>
[[gnu::optimize("no-tree-pre")]] void tile(const uint8_t* u, int64_t k, const int8_t* panel,
                                           PanelAhead ahead, Store store) {
  const int64_t full = k / kInt8PanelGroup;
  __m512i sum[MR][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) sum[r][v] = _mm512_setzero_si512();
  const int8_t* w = panel;
  for (int64_t g = 0; g < full; ++g, w += kGroupBytes) {
    if (g < ahead.groups)
      for (int line = 0; line < ahead.per_group; ++line, ahead.lines += 64)
        _mm_prefetch(reinterpret_cast<const char*>(ahead.lines), _MM_HINT_T1);
    const uint8_t* at = u + g * kInt8PanelGroup;
    multiply_group<MR>(sum, w, [&](int r) {
      int32_t word;
      std::memcpy(&word, at + r * k, sizeof(word));
      return word;
    });
  }
  if (full * kInt8PanelGroup < k)
    multiply_group<MR>(sum, w, [&](int r) { return group_word(u + r * k, full, k); });
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) store(r, v, sum[r][v]);
}

// f(std::integral_constant<int, MR>{}) for MR = min(rows, kTileRows), rows >= 1: a tile of the
// rows that are left, its height a template argument.
template <int MR = kTileRows, typename F>
void with_tile_rows(int64_t rows, F f) {
  if constexpr (MR > 1) {
    if (rows < MR) return with_tile_rows<MR - 1>(rows, f);
  }
  f(std::integral_constant<int, MR>{});
}

// One weight of run_panels: its panels, its n columns and where their sums go.
template <typename Store>
struct PanelJob {
  const int8_t* panels = nullptr;
  int64_t n = 0;
  Store store;
};

// Every tile of rows [0, m) over each panel of each job (weights of the same depth k on the same
// u). job.store(row, column, mask, sums): the sums of a row's 16 columns from `column` on, `mask`
// the ones that exist. Outside a parallel region, with kRowsPerThreadToSplitRows rows a thread or
// more, each thread takes its static_rows (parallel.h) of every panel; with fewer the threads share
// (panel, rows) items, the jobs' panels one after the other: the panels, each whole where there are
// at least two panels a thread, else cut into ranges of tiles so that every thread has two items or
// more. prologue(thread, threads), unless nullptr: each thread's part of making u, its static_rows,
// run by every thread of the same parallel region before any reads u (one region for the products
// instead of two; a barrier where the threads read each other's rows).
template <typename Store, typename Prologue = std::nullptr_t>
void run_panels(const uint8_t* u, int64_t m, int64_t k, int64_t panel_groups,
                const PanelJob<Store>* jobs, int count, Prologue prologue = nullptr) {
  constexpr bool kPrologue = !std::is_same_v<Prologue, std::nullptr_t>;
  if (m == 0 || count == 0) return;
  // first_panel[j]: the first panel of job j in the panels of all the jobs.
  constexpr int kMaxJobs = 4;
  TFM_CHECK(count <= kMaxJobs, "run_panels: {} weights (at most {})", count, kMaxJobs);
  int64_t first_panel[kMaxJobs + 1] = {0};
  for (int j = 0; j < count; ++j)
    first_panel[j + 1] = first_panel[j] + (jobs[j].n + kInt8PanelColumns - 1) / kInt8PanelColumns;
  const int64_t panel_count = first_panel[count];
  const int64_t panel_bytes = panel_groups * kGroupBytes;
  const int64_t tiles = (m + kTileRows - 1) / kTileRows;
  auto job_of = [&](int64_t all) {
    int j = 0;
    while (all >= first_panel[j + 1]) ++j;
    return j;
  };
  // Rows [begin, end) of panel `all` (of all the jobs'): its tiles read the panel again, from L2.
  // With prefetch_u, each tile first asks for the next tile's rows of u, which the other threads
  // may have written. With prefetch_next, the tiles share out the prefetching of the next panel
  // into L2. In a decoding step the weights stream from memory, and only a panel's first tile
  // reads it from there: alone, that tile waited on the memory for each line while the memory
  // idled under the other tiles (docs/journal/2026-12-06-int8-panels-streamed.md). The f32 panel
  // kernel streams its weights the same way (panel_matmul_cpu.cc). A thread with a single tile
  // reads each panel once, and there the hardware's prefetchers keep up.
  auto run = [&](int64_t all, int64_t begin, int64_t end, bool prefetch_u, bool prefetch_next) {
    const int j = job_of(all);
    const PanelJob<Store>& job = jobs[j];
    const int64_t p = all - first_panel[j], first = p * kInt8PanelColumns;
    const int64_t my_tiles = (end - begin + kTileRows - 1) / kTileRows;
    const int8_t* next = nullptr;
    if (prefetch_next && my_tiles > 1 && all + 1 < panel_count) {
      const int next_job = job_of(all + 1);
      next = jobs[next_job].panels + (all + 1 - first_panel[next_job]) * panel_bytes;
    }
    __mmask16 masks[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      const int64_t columns = std::clamp<int64_t>(job.n - first - 16 * v, 0, 16);
      masks[v] = static_cast<__mmask16>((1u << columns) - 1u);
    }
    const int8_t* panel = job.panels + p * panel_bytes;
    for (int64_t r = begin; r < end; r += kTileRows) {
      if (prefetch_u)
        for (const uint8_t* line = u + std::min(end, r + kTileRows) * k;
             line < u + std::min(end, r + 2 * kTileRows) * k; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
      auto tile_store = [&](int row, int v, __m512i sum) {
        if (masks[v]) job.store(r + row, first + 16 * v, masks[v], sum);
      };
      const PanelAhead ahead =
          share_of_next(next, panel_bytes, my_tiles, (r - begin) / kTileRows, k / kInt8PanelGroup);
      with_tile_rows(end - r, [&](auto tile_rows) {
        tile<decltype(tile_rows)::value>(u + r * k, k, panel, ahead, tile_store);
      });
    }
  };
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads == 1) {
    if constexpr (kPrologue) prologue(0, 1);
    for (int64_t p = 0; p < panel_count; ++p) run(p, 0, m, false, true);
    return;
  }
  // Many rows: each thread its own rows (parallel.h, kRowsPerThreadToSplitRows), the ones its
  // prologue made, so without a barrier.
  if (m >= kRowsPerThreadToSplitRows * threads) {
#pragma omp parallel num_threads(threads)
    {
      const int thread = omp_get_thread_num(), team = omp_get_num_threads();
      if constexpr (kPrologue) prologue(thread, team);
      const auto [begin, end] = static_rows(m, thread, team);
      if (begin < end)
        for (int64_t p = 0; p < panel_count; ++p) run(p, begin, end, false, true);
    }
    return;
  }
  const int64_t chunks = std::min<int64_t>(tiles, (2 * threads + panel_count - 1) / panel_count);
  const int64_t chunk_rows = (tiles + chunks - 1) / chunks * kTileRows;
#pragma omp parallel num_threads(threads)
  {
    if constexpr (kPrologue) {
      prologue(omp_get_thread_num(), omp_get_num_threads());
#pragma omp barrier
    }
    bool first = true;
#pragma omp for schedule(static) nowait
    for (int64_t item = 0; item < panel_count * chunks; ++item) {
      const int64_t begin = item % chunks * chunk_rows;
      if (begin < m) run(item / chunks, begin, std::min(m, begin + chunk_rows), first, false);
      first = false;
    }
  }
}

// run_panels for one weight.
template <typename Store, typename Prologue = std::nullptr_t>
void run_panels(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                int64_t panel_groups, Store store, Prologue prologue = nullptr) {
  const PanelJob<Store> job{panels, n, store};
  run_panels(u, m, k, panel_groups, &job, 1, prologue);
}

}  // namespace

bool int8_panel_kernel_available() {
  return true;
}

void panel_product_u8s8(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                        int64_t panel_groups, int32_t* acc) {
  run_panels(u, m, n, k, panels, panel_groups,
             [&](int64_t row, int64_t column, __mmask16 mask, __m512i sum) {
               _mm512_mask_storeu_epi32(acc + row * n + column, mask, sum);
             });
}

namespace {

// dequantize_product's arithmetic (quantize_cpu.h, dequantize16) on the sums in registers, into
// y [m, n]. A type of its own (not a lambda) so that run_panels' jobs fit in an array.
struct DequantisingStore {
  DequantisingStore() = default;
  DequantisingStore(int64_t n_, const Int8Epilogue& e_, float* y_)
      : n(n_),
        e(&e_),
        y(y_),
        zero_point_shift(
            _mm512_set1_epi32(std::countr_zero(static_cast<uint32_t>(e_.zero_point)))) {}
  void operator()(int64_t row, int64_t column, __mmask16 mask, __m512i sum) const {
    __m512 v = dequantize16(sum, mask, e->w_row_sums + column, e->w_scales + column,
                            e->bias ? e->bias + column : nullptr, _mm512_set1_ps(e->x_scales[row]),
                            zero_point_shift, e->post == kernels::PostOp::relu);
    v = smooth_activation16(e->post, v);
    _mm512_mask_storeu_ps(y + row * n + column, mask, v);
  }

  int64_t n = 0;
  const Int8Epilogue* e = nullptr;
  float* y = nullptr;
  __m512i zero_point_shift = _mm512_setzero_si512();
};

}  // namespace

void panel_linear_u8s8(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                       int64_t panel_groups, const Int8Epilogue& e, float* y) {
  run_panels(u, m, n, k, panels, panel_groups, DequantisingStore(n, e, y));
}

void panel_linear_quantising(const float* x, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                             int64_t panel_groups, Int8Epilogue e, uint8_t* u, float* x_scales,
                             float* y) {
  const Int8PanelLinear product{panels, n, e, y};
  panel_linears_quantising(x, m, k, panel_groups, &product, 1, u, x_scales);
}

void panel_linears_quantising(const float* x, int64_t m, int64_t k, int64_t panel_groups,
                              const Int8PanelLinear* products, int count, uint8_t* u,
                              float* x_scales) {
  TFM_CHECK(count >= 1 && count <= 4, "panel_linears_quantising: {} weights (1 to 4)", count);
  const int32_t zero_point = products[0].e.zero_point;
  Int8Epilogue epilogues[4];
  PanelJob<DequantisingStore> jobs[4];
  for (int j = 0; j < count; ++j) {
    TFM_CHECK(products[j].e.zero_point == zero_point,
              "panel_linears_quantising: the weights' activations differ in zero point");
    epilogues[j] = products[j].e;
    epilogues[j].x_scales = x_scales;
    jobs[j] = {products[j].panels, products[j].n,
               DequantisingStore(products[j].n, epilogues[j], products[j].y)};
  }
  run_panels(u, m, k, panel_groups, jobs, count, [&](int thread, int threads) {
    const auto [begin, end] = static_rows(m, thread, threads);
    for (int64_t i = begin; i < end; ++i)
      x_scales[i] = quantize_row_u8(x + i * k, k, u + i * k, zero_point);
  });
}

#else  // no AVX512BW: oneDNN's products

bool int8_panel_kernel_available() {
  return false;
}

void panel_product_u8s8(const uint8_t*, int64_t, int64_t, int64_t, const int8_t*, int64_t,
                        int32_t*) {
  fail("panel_product_u8s8: this build has no AVX512BW (int8_panel_kernel_available() is false)");
}

void panel_linear_u8s8(const uint8_t*, int64_t, int64_t, int64_t, const int8_t*, int64_t,
                       const Int8Epilogue&, float*) {
  fail("panel_linear_u8s8: this build has no AVX512BW (int8_panel_kernel_available() is false)");
}

void panel_linear_quantising(const float*, int64_t, int64_t, int64_t, const int8_t*, int64_t,
                             Int8Epilogue, uint8_t*, float*, float*) {
  fail(
      "panel_linear_quantising: this build has no AVX512BW (int8_panel_kernel_available() is "
      "false)");
}

void panel_linears_quantising(const float*, int64_t, int64_t, int64_t, const Int8PanelLinear*, int,
                              uint8_t*, float*) {
  fail(
      "panel_linears_quantising: this build has no AVX512BW (int8_panel_kernel_available() is "
      "false)");
}

#endif

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
