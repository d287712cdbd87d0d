#include "tfm/kernels/cpu/blocked_gemm_cpu.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/kernels/cpu/vector_math.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace tfm::cpu {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag{[] {
    const char* choice = std::getenv("TFM_CPU_GEMM");
    return !(choice && std::strcmp(choice, "onednn") == 0);
  }()};
  return flag;
}

}  // namespace

void set_blocked_gemm_enabled(bool enabled) {
  enabled_flag().store(enabled, std::memory_order_relaxed);
}

bool blocked_gemm_enabled() {
  return enabled_flag().load(std::memory_order_relaxed);
}

bool blocked_gemm_applies(int64_t m, int64_t n, int64_t k) {
  // Measured with gemm_bench's training_product_f32 (docs/BENCHMARKS.md): from about 2^30
  // multiply-adds (the base model's 4096-token products, the output layers') the kernel ran
  // 0.90-1.48x oneDNN's rate and a base step 5-8% faster; below, where the operands stay in cache
  // (the Multi30k model's 2048 x 256 x 256), oneDNN ran up to 1.5x faster in some runs.
  constexpr double kMinMultiplyAdds = 1073741824.0;  // 2^30
  return blocked_gemm_available() && blocked_gemm_enabled() && m >= 256 && n >= 256 && k >= 256 &&
         static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >=
             kMinMultiplyAdds;
}

#ifdef __AVX512F__

namespace {

// The micro-kernel's tile of c: 14 rows x 32 columns, 28 accumulators, two registers of b's row
// and one broadcast of a: 31 of the 32 registers.
constexpr int64_t kMr = 14;
constexpr int64_t kNr = 32;
// Blocking: a 14-row micro-panel of a (kKc x 14 x 4 B = 14 KiB) stays in L1 while the packed block
// of b (kKc x kNc, 512 KiB) streams from L2 under it, 128 bytes per depth; a's block (kMc x kKc,
// 336 KiB) is packed once per block of b. Measured on a Xeon (32 KiB L1, 1 MiB L2) against
// kKc 192-512 and kNc 256-1024, and against the order that keeps b's micro-panel in L1 instead
// (10-35% slower there: a's stream evicted it).
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 24 * kMr;
constexpr int64_t kNc = 16 * kNr;

// The lanes [0, count) of 16, any count.
__mmask16 lanes(int64_t count) {
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

// Loads `count` (at most 16) rows of 16 elements, rows `stride` apart, each masked to `columns`;
// the rows past `count` are zero. Then transposes them.
inline void load_transposed(const float* p, int64_t stride, int64_t count, __mmask16 columns,
                            __m512 r[16]) {
  for (int i = 0; i < 16; ++i)
    r[i] = i < count ? _mm512_maskz_loadu_ps(columns, p + i * stride) : _mm512_setzero_ps();
  transpose_16x16(r);
}

// a's rows [0, rows) (rows <= kMc) and depths [0, depth) into micro-panels of kMr rows: panel p
// at out + p * depth * kMr holds [depth][kMr], rows past `rows` zero.
void pack_a(StridedMatrix a, int64_t rows, int64_t depth, float* out) {
  if (a.col_stride != 1 && a.row_stride == 1) {
    // Columns contiguous (a = g^T): each depth's column read once from start to end, its pieces
    // copied to every panel (panel by panel, the reads jumped between `depth` lines: the weight
    // gradients at 4096 tokens ran 1.05-1.2x slower).
    for (int64_t k = 0; k < depth; ++k) {
      const float* column = a.data + k * a.col_stride;
      for (int64_t i0 = 0; i0 < rows; i0 += kMr)
        _mm512_mask_storeu_ps(out + i0 * depth + k * kMr, lanes(kMr),
                              _mm512_maskz_loadu_ps(lanes(rows - i0), column + i0));
    }
    return;
  }
  // Rows contiguous (blocked_gemm_f32 checked that one stride is 1): transpose 16 x 16 blocks.
  for (int64_t i0 = 0; i0 < rows; i0 += kMr, out += depth * kMr) {
    const float* src = a.data + i0 * a.row_stride;
    for (int64_t k0 = 0; k0 < depth; k0 += 16) {
      __m512 r[16];
      load_transposed(src + k0, a.row_stride, std::min(kMr, rows - i0), lanes(depth - k0), r);
      for (int64_t j = 0; j < std::min<int64_t>(16, depth - k0); ++j)
        _mm512_mask_storeu_ps(out + (k0 + j) * kMr, lanes(kMr), r[j]);
    }
  }
}

// b's depths [0, depth) and columns [0, cols) (cols <= kNc) into micro-panels of kNr columns:
// panel q at out + q * depth * kNr holds [depth][kNr], columns past `cols` zero. `out` is 64-byte
// aligned.
void pack_b(StridedMatrix b, int64_t depth, int64_t cols, float* out) {
  if (b.col_stride == 1) {
    // Rows of b contiguous: each row read once from start to end, two registers to every panel (as
    // in pack_a, not panel by panel).
    for (int64_t k = 0; k < depth; ++k) {
      const float* row = b.data + k * b.row_stride;
      for (int64_t j0 = 0; j0 < cols; j0 += kNr) {
        float* panel_row = out + j0 * depth + k * kNr;
        _mm512_store_ps(panel_row, _mm512_maskz_loadu_ps(lanes(cols - j0), row + j0));
        _mm512_store_ps(panel_row + 16,
                        _mm512_maskz_loadu_ps(lanes(cols - j0 - 16), row + j0 + 16));
      }
    }
    return;
  }
  // Columns contiguous (b = W^T): transpose 16 x 16 blocks.
  for (int64_t j0 = 0; j0 < cols; j0 += kNr, out += depth * kNr) {
    const float* src = b.data + j0 * b.col_stride;
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t count = std::clamp<int64_t>(cols - j0 - 16 * half, 0, 16);
      for (int64_t k0 = 0; k0 < depth; k0 += 16) {
        __m512 r[16];
        load_transposed(src + 16 * half * b.col_stride + k0, b.col_stride, count, lanes(depth - k0),
                        r);
        for (int64_t j = 0; j < std::min<int64_t>(16, depth - k0); ++j)
          _mm512_store_ps(out + (k0 + j) * kNr + 16 * half, r[j]);
      }
    }
  }
}

// What a tile does with its sums: add them to c (a later depth block, or `accumulate`) or write
// them, add the bias (first depth block), apply ReLU (last).
struct Epilogue {
  bool load_c;
  const float* bias;  // at the tile's first column, or null
  bool relu;
};

// c's tile [rows][columns] (rows <= 14, columns <= 32) from a's micro-panel [depth][14] and b's
// [depth][32]: 28 accumulators, two loads of b and 14 broadcasts of a per depth.
inline void micro_kernel(int64_t depth, const float* a, const float* b, float* c, int64_t ldc,
                         int64_t rows, int64_t columns, const Epilogue& epilogue) {
  __m512 acc[kMr][2];
#pragma GCC unroll 14
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  // c's tile is needed only at the end: its lines arrive while the sums run (2-4% faster).
  for (int64_t r = 0; r < rows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < depth; ++k, a += kMr, b += kNr) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
    for (int r = 0; r < kMr; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
  }
  const __mmask16 masks[2] = {lanes(columns), lanes(columns - 16)};
  __m512 bias[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  if (epilogue.bias)
    for (int v = 0; v < 2; ++v) bias[v] = _mm512_maskz_loadu_ps(masks[v], epilogue.bias + 16 * v);
#pragma GCC unroll 14
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

float* aligned_64(std::vector<float>& buffer, size_t floats) {
  buffer.resize(floats + 16);
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) &
                                  ~uintptr_t{63});
}

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The whole product for rows [0, m) and columns [0, n) of the given views, on this thread, with
// its own packed blocks. (Threads that packed each block of b together and waited for one another
// ran no faster here: gemm_bench, 2026-11-27.)
void gemm_block(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                const float* bias, bool accumulate, bool relu, float* c, int64_t ldc) {
  thread_local std::vector<float> a_buffer, b_buffer;
  float* a_packed = aligned_64(a_buffer, kMc * kKc);
  float* b_packed = aligned_64(b_buffer, kKc * kNc);
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t cols = std::min(kNc, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t depth = std::min(kKc, k - p0);
      pack_b({b.data + p0 * b.row_stride + j0 * b.col_stride, b.row_stride, b.col_stride}, depth,
             cols, b_packed);
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        const int64_t rows = std::min(kMc, m - i0);
        pack_a({a.data + i0 * a.row_stride + p0 * a.col_stride, a.row_stride, a.col_stride}, rows,
               depth, a_packed);
        // a's micro-panel stays in L1 while b's block streams from L2 under it.
        for (int64_t ir = 0; ir < rows; ir += kMr) {
          const float* a_panel = a_packed + ir * depth;
          for (int64_t jr = 0; jr < cols; jr += kNr) {
            const Epilogue epilogue{p0 > 0 || accumulate,
                                    p0 == 0 && bias ? bias + j0 + jr : nullptr,
                                    relu && p0 + depth == k};
            micro_kernel(depth, a_panel, b_packed + jr * depth, c + (i0 + ir) * ldc + j0 + jr, ldc,
                         std::min(kMr, rows - ir), std::min(kNr, cols - jr), epilogue);
          }
        }
      }
    }
  }
}

}  // namespace

bool blocked_gemm_available() {
  return true;
}

void blocked_gemm_f32(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                      const float* bias, bool accumulate, bool relu, float* c, int64_t ldc) {
  TFM_CHECK(a.row_stride == 1 || a.col_stride == 1, "blocked_gemm_f32: a has no unit stride");
  TFM_CHECK(b.row_stride == 1 || b.col_stride == 1, "blocked_gemm_f32: b has no unit stride");
  if (m == 0 || n == 0) return;
  TFM_CHECK(k > 0, "blocked_gemm_f32: an empty inner dimension");
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Threads split c into a grid of rows_split x (threads / rows_split) blocks, each a whole product
  // of its own. The split minimises a block's cost in units of k: rows x cols multiply-adds plus
  // (rows + cols) packed elements, each weighed as 8 multiply-adds (an estimate, not measured per
  // split; among splits of equal work it takes the one that packs less).
  int rows_split = 1;
  double best = -1;
  for (int split = 1; split <= threads; ++split) {
    if (threads % split) continue;
    const double block_rows = static_cast<double>(round_up((m + split - 1) / split, kMr));
    const double block_cols =
        static_cast<double>(round_up((n + threads / split - 1) / (threads / split), kNr));
    const double cost = block_rows * block_cols + 8.0 * (block_rows + block_cols);
    if (best < 0 || cost < best) best = cost, rows_split = split;
  }
  const int cols_split = threads / rows_split;
  const int64_t block_rows = round_up((m + rows_split - 1) / rows_split, kMr);
  const int64_t block_cols = round_up((n + cols_split - 1) / cols_split, kNr);
  auto run = [&](int block) {
    const int64_t i0 = (block / cols_split) * block_rows, j0 = (block % cols_split) * block_cols;
    if (i0 >= m || j0 >= n) return;
    gemm_block(std::min(block_rows, m - i0), std::min(block_cols, n - j0), k,
               {a.data + i0 * a.row_stride, a.row_stride, a.col_stride},
               {b.data + j0 * b.col_stride, b.row_stride, b.col_stride}, bias ? bias + j0 : nullptr,
               accumulate, relu, c + i0 * ldc + j0, ldc);
  };
  if (threads == 1) {
    run(0);
    return;
  }
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int block = 0; block < threads; ++block) run(block);
}

#else  // no AVX-512: cpu::gemm keeps oneDNN's products

bool blocked_gemm_available() {
  return false;
}

void blocked_gemm_f32(int64_t, int64_t, int64_t, StridedMatrix, StridedMatrix, const float*, bool,
                      bool, float*, int64_t) {
  fail("blocked_gemm_f32: this build has no AVX-512 (blocked_gemm_available() is false)");
}

#endif

}  // namespace tfm::cpu
