#include "tfm/kernels/cpu/blocked_gemm_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tfm/core/error.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#include "tfm/kernels/cpu/blocked_gemm_driver.h"
#endif

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag{[] {
    const char* choice = environment_choice("TFM_CPU_GEMM", {"onednn", "ours"});
    return !(choice && std::strcmp(choice, "onednn") == 0);
  }()};
  return flag;
}

}  // namespace

const char* environment_choice(const char* name, std::initializer_list<const char*> valid) {
  const char* value = std::getenv(name);
  if (value == nullptr) return nullptr;
  std::string names;
  for (const char* v : valid) {
    if (std::strcmp(value, v) == 0) return value;
    names += names.empty() ? v : std::string(", ") + v;
  }
  std::fprintf(stderr, "tfm: %s=%s is not one of %s; ignored\n", name, value, names.c_str());
  return nullptr;
}

void set_blocked_gemm_enabled(bool enabled) {
  enabled_flag().store(enabled, std::memory_order_relaxed);
}

bool blocked_gemm_enabled() {
  return enabled_flag().load(std::memory_order_relaxed);
}

bool blocked_gemm_applies(int64_t m, int64_t n, int64_t k) {
  return blocked_gemm_available() && blocked_gemm_enabled() && blocked_gemm_large_enough(m, n, k);
}

bool blocked_gemm_large_enough(int64_t m, int64_t n, int64_t k) {
  // Measured with gemm_bench's training_product_f32: from about 2^30 multiply-adds (the base
  // model's 4096-token products, the output layers') the kernel is as fast as oneDNN or faster;
  // below, where the operands stay in cache (the Multi30k model's 2048 x 256 x 256), oneDNN is
  // faster (docs/journal/2026-11-27-blocked-f32-kernel.md).
  constexpr double kMinMultiplyAdds = 1073741824.0;  // 2^30
  return m >= 256 && n >= 256 && k >= 256 &&
         static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >=
             kMinMultiplyAdds;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

namespace {

using blocked::Epilogue;
using blocked::lanes;
using blocked::transpose_16x16;

// 16 f32 from the elements [0, 16) of p where `mask` is set (zero elsewhere): floats as they are,
// bf16 widened, exactly (a bf16 is the high half of an f32). (The zero-masked forms with every lane
// set: GCC 12 warns of the plain forms' undefined pass-through register.)
inline __m512 load_16(const float* p, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, p);
}
inline __m512 load_16(const bf16* p, __mmask16 mask) {
  constexpr __mmask16 kAll = 0xffff;
  const __m512i halves = _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(mask, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, halves, 16));
}

// Loads `count` (at most 16) rows of 16 elements, rows `stride` apart, each masked to `columns`;
// the rows past `count` are zero. Then transposes them.
template <class T>
inline void load_transposed(const T* p, int64_t stride, int64_t count, __mmask16 columns,
                            __m512 r[16]) {
  for (int i = 0; i < 16; ++i)
    r[i] = i < count ? load_16(p + i * stride, columns) : _mm512_setzero_ps();
  transpose_16x16(r);
}

// The f32 kernel, for f32 operands (F32Kernel) and for bf16 ones widened to f32 as they are packed
// (WidenedBf16Kernel): on a CPU whose vdpbf16ps does no more multiply-adds a cycle than its FMA
// (an Intel Xeon without AMX: half as many), the FMA's rate beats any bf16 dot-product kernel,
// oneDNN's included, and the products are the same (a product of two bf16 is exact in f32).
template <class T>
struct FmaKernel {
  using Source = T;
  using Packed = float;
  // The micro-kernel's tile of c: 14 rows x 32 columns, 28 accumulators, two registers of b's row
  // and one broadcast of a: 31 of the 32 registers.
  static constexpr int64_t kMr = 14;
  static constexpr int64_t kNr = 32;
  // Blocking: a 14-row micro-panel of a (kKc x 14 x 4 B = 14 KiB) stays in L1 while the packed
  // block of b (kKc x kNc, 512 KiB) streams from L2 under it, 128 bytes per depth; a's block (kMc x
  // kKc, 84 KiB) is packed once per block of b. Measured on a Xeon (32 KiB L1, 1 MiB L2) against
  // kKc 192-512 and kNc 256-1024, and against the order that keeps b's micro-panel in L1 instead
  // (slower: a's stream evicted it; docs/journal/2026-11-27-blocked-f32-kernel.md). a's blocks of
  // 6 micro-panels leave b's block in a 1 MiB L2: on a Zen 5, 1.0-1.3x blocks of 24 for base's
  // products (docs/journal/2026-12-03-split-sums-smaller-a-blocks.md).
  static constexpr int64_t kKc = 256;
  static constexpr int64_t kMc = 6 * kMr;
  static constexpr int64_t kNc = 16 * kNr;

  static int64_t packed_depth(int64_t depth) { return depth; }

  // a's rows [0, rows) (rows <= kMc) and depths [0, depth) into micro-panels of kMr rows: panel p
  // at out + p * depth * kMr holds [depth][kMr], rows past `rows` zero.
  static void pack_a(Strided<T> a, int64_t rows, int64_t depth, float* out) {
    if (a.col_stride != 1 && a.row_stride == 1) {
      // Columns contiguous (a = g^T): each depth's column read once from start to end, its pieces
      // copied to every panel (panel by panel, the reads jumped between `depth` lines: the weight
      // gradients at 4096 tokens ran slower; docs/journal/2026-11-27-blocked-f32-kernel.md).
      for (int64_t k = 0; k < depth; ++k) {
        const T* column = a.data + k * a.col_stride;
        blocked::prefetch_span(column + blocked::kPackAheadDepths * a.col_stride, rows);
        for (int64_t i0 = 0; i0 < rows; i0 += kMr)
          _mm512_mask_storeu_ps(out + i0 * depth + k * kMr, lanes(kMr),
                                load_16(column + i0, lanes(rows - i0)));
      }
      return;
    }
    // Rows contiguous (blocked_gemm_f32 checked that one stride is 1): transpose 16 x 16 blocks,
    // the next panel's rows asked for at the same depths (blocked::prefetch_rows).
    for (int64_t i0 = 0; i0 < rows; i0 += kMr, out += depth * kMr) {
      const T* src = a.data + i0 * a.row_stride;
      for (int64_t k0 = 0; k0 < depth; k0 += 16) {
        __m512 r[16];
        blocked::prefetch_rows(src + kMr * a.row_stride + k0, a.row_stride, kMr);
        load_transposed(src + k0, a.row_stride, std::min(kMr, rows - i0), lanes(depth - k0), r);
        for (int64_t j = 0; j < std::min<int64_t>(16, depth - k0); ++j)
          _mm512_mask_storeu_ps(out + (k0 + j) * kMr, lanes(kMr), r[j]);
      }
    }
  }

  // b's depths [0, depth) and columns [0, cols) (cols <= kNc) into micro-panels of kNr columns:
  // panel q at out + q * depth * kNr holds [depth][kNr], columns past `cols` zero. `out` is 64-byte
  // aligned.
  static void pack_b(Strided<T> b, int64_t depth, int64_t cols, float* out) {
    if (b.col_stride == 1) {
      // Rows of b contiguous: each row read once from start to end, two registers to every panel
      // (as in pack_a, not panel by panel), the row kPackAheadDepths further on asked for.
      for (int64_t k = 0; k < depth; ++k) {
        const T* row = b.data + k * b.row_stride;
        blocked::prefetch_span(row + blocked::kPackAheadDepths * b.row_stride, cols);
        for (int64_t j0 = 0; j0 < cols; j0 += kNr) {
          float* panel_row = out + j0 * depth + k * kNr;
          _mm512_store_ps(panel_row, load_16(row + j0, lanes(cols - j0)));
          _mm512_store_ps(panel_row + 16, load_16(row + j0 + 16, lanes(cols - j0 - 16)));
        }
      }
      return;
    }
    // Columns contiguous (b = W^T): transpose 16 x 16 blocks.
    for (int64_t j0 = 0; j0 < cols; j0 += kNr, out += depth * kNr) {
      const T* src = b.data + j0 * b.col_stride;
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t count = std::clamp<int64_t>(cols - j0 - 16 * half, 0, 16);
        for (int64_t k0 = 0; k0 < depth; k0 += 16) {
          __m512 r[16];
          load_transposed(src + 16 * half * b.col_stride + k0, b.col_stride, count,
                          lanes(depth - k0), r);
          for (int64_t j = 0; j < std::min<int64_t>(16, depth - k0); ++j)
            _mm512_store_ps(out + (k0 + j) * kNr + 16 * half, r[j]);
        }
      }
    }
  }

  // c's tile [rows][columns] (rows <= 14, columns <= 32) from a's micro-panel [depth][14] and b's
  // [depth][32]: 28 accumulators, two loads of b and 14 broadcasts of a per depth.
  // Inlined into the loops, as GCC does with one instantiation of them but not with two.
  __attribute__((always_inline)) static void micro_kernel(int64_t depth, const float* a,
                                                          const float* b, float* c, int64_t ldc,
                                                          int64_t rows, int64_t columns,
                                                          const Epilogue& epilogue) {
    __m512 acc[kMr][2];
#pragma GCC unroll 14
    for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    if (c) blocked::prefetch_tile(c, ldc, rows);  // null: the tile goes to bf16 (Epilogue)
    for (int64_t k = 0; k < depth; ++k, a += kMr, b += kNr) {
      const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 14
      for (int r = 0; r < kMr; ++r) {
        const __m512 ar = _mm512_set1_ps(a[r]);
        acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
      }
    }
    blocked::store_tile(acc, c, ldc, rows, columns, epilogue);
  }
};

using F32Kernel = FmaKernel<float>;
using WidenedBf16Kernel = FmaKernel<bf16>;

}  // namespace

bool blocked_gemm_available() {
  return true;
}

void blocked_gemm_f32(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                      const float* bias, bool accumulate, bool relu, float* c, int64_t ldc) {
  blocked::product<F32Kernel>("blocked_gemm_f32", m, n, k, a, b, bias, accumulate, relu, c, ldc);
}

void blocked_gemm_bf16_widened(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a,
                               StridedBf16Matrix b, const float* bias, bool accumulate, bool relu,
                               float* c, int64_t ldc) {
  blocked::product<WidenedBf16Kernel>("blocked_gemm_bf16_widened", m, n, k, a, b, bias, accumulate,
                                      relu, c, ldc);
}

#else  // no AVX-512: cpu::gemm keeps oneDNN's products

bool blocked_gemm_available() {
  return false;
}

void blocked_gemm_f32(int64_t, int64_t, int64_t, StridedMatrix, StridedMatrix, const float*, bool,
                      bool, float*, int64_t) {
  fail("blocked_gemm_f32: this build has no AVX-512 (blocked_gemm_available() is false)");
}

void blocked_gemm_bf16_widened(int64_t, int64_t, int64_t, StridedBf16Matrix, StridedBf16Matrix,
                               const float*, bool, bool, float*, int64_t) {
  fail("blocked_gemm_bf16_widened: this build has no AVX-512 (blocked_gemm_available() is false)");
}

#endif

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
