// The blocked product with bf16 operands (blocked_gemm_cpu.h): the f32 kernel's loops
// (blocked_gemm_driver.h) over packed micro-panels whose 32-bit elements are pairs of bf16 along
// the depth, (x[2q], x[2q + 1]) in the low and high half, the operand order of vdpbf16ps:
//   acc[j] += a[r][2q] b[2q][j] + a[r][2q+1] b[2q+1][j]   (one instruction per 16 columns)
// so the 14 x 32 tile gains two depths per instruction: twice the f32 kernel's multiply-adds per
// instruction (how many instructions a cycle depends on the CPU: docs/BENCHMARKS.md).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/core/error.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include <immintrin.h>

#include "tfm/kernels/cpu/blocked_gemm_driver.h"
#endif

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// The default of bf16_products() (blocked_gemm_cpu.h).
Bf16Products default_bf16_products() {
  if (const char* choice = environment_choice("TFM_CPU_GEMM_BF16", {"onednn", "dot", "widened"})) {
    for (Bf16Products p : {Bf16Products::onednn, Bf16Products::dot, Bf16Products::widened})
      if (std::strcmp(choice, bf16_products_name(p)) == 0) return p;
  }
  const char* gemm = std::getenv("TFM_CPU_GEMM");  // a typo: blocked_gemm_enabled() says so
  if (gemm && std::strcmp(gemm, "ours") == 0) return Bf16Products::dot;
  if (onednn_uses_amx()) return Bf16Products::onednn;
  const double rate = vdpbf16ps_to_fma_rate();
  // Without AVX512-BF16 (rate 0) oneDNN's bf16 products have not been measured against ours.
  if (rate == 0) return Bf16Products::onednn;
  return rate <= 1 ? Bf16Products::widened : Bf16Products::dot;
}

std::atomic<Bf16Products>& choice_in_force() {
  static std::atomic<Bf16Products> choice{default_bf16_products()};
  return choice;
}

}  // namespace

const char* bf16_products_name(Bf16Products choice) {
  switch (choice) {
    case Bf16Products::onednn:
      return "onednn";
    case Bf16Products::dot:
      return "dot";
    case Bf16Products::widened:
      return "widened";
  }
  return "?";
}

Bf16Products bf16_products() {
  return choice_in_force().load(std::memory_order_relaxed);
}

void set_bf16_products(Bf16Products choice) {
  choice_in_force().store(choice, std::memory_order_relaxed);
}

bool onednn_uses_amx() {
  // Asked once: the answer fixes oneDNN's ISA for the process (ONEDNN_MAX_CPU_ISA can lower it).
  static const bool amx = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  return amx;
}

bool bf16_products_widened() {
  return bf16_products() == Bf16Products::widened && blocked_gemm_available() &&
         blocked_gemm_enabled() && !onednn_uses_amx();
}

namespace {

// Where the vdpbf16ps kernel was measured as fast as oneDNN 2.6's bf16 matmul or faster
// (gemm_bench's training_product_bf16 on an AMD Zen 5, 2 threads, and whole training steps;
// docs/journal/2026-12-02-bf16-dot-default.md): products of at least 128 in each dim with sums of
// up to 2048 terms (1.0-1.25x alone, faster in the step), and longer sums whose sum cpu::gemm
// splits between the threads (kSplitSumMostOutput) into a c of at most 2^16 elements (a small
// model's weight gradients) or with at least 256 rows and columns (base's 512 x 512 weight
// gradients, the output layer's input gradient of 512 tokens). Each thread then packs its half of
// a once for c's columns: with 128 of them (the main job's output layer, 1024 x 128 x 8000) that
// is 0.85-0.9x oneDNN (docs/journal/2026-12-03-split-sums-smaller-a-blocks.md). Into a c of up to
// 2^20 elements with at least 512 rows and columns, sums of up to 4096 terms (base's 4096-token
// weight gradients of the feed-forward layers) are 1.0-1.15x oneDNN unsplit, since the packing of
// a's columns prefetches (docs/journal/2026-12-03-zen5-suite-and-packing-prefetch.md).
bool dot_kernel_faster(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kLongSum = 2048, kSmallOutput = int64_t{1} << 16;
  constexpr int64_t kWideOutput = int64_t{1} << 20, kWideOutputLongestSum = 4096;
  if (std::min({m, n, k}) < 128) return false;
  return k <= kLongSum || m * n <= kSmallOutput ||
         (m * n <= kSplitSumMostOutput && std::min(m, n) >= 256) ||
         (m * n <= kWideOutput && std::min(m, n) >= 512 && k <= kWideOutputLongestSum);
}

}  // namespace

bool blocked_gemm_bf16_applies(int64_t m, int64_t n, int64_t k) {
  // Where oneDNN multiplies bf16 with AMX's tile products, those pass any vector kernel.
  if (!blocked_gemm_enabled() || onednn_uses_amx()) return false;
  switch (bf16_products()) {
    case Bf16Products::dot:
      return blocked_gemm_bf16_available() && dot_kernel_faster(m, n, k);
    case Bf16Products::widened:
      // gemm_bench's training_product_bf16 on a Xeon without AMX: faster than oneDNN's vdpbf16ps
      // products at every shape measured down to 128 x 256 x 256
      // (docs/journal/2026-11-27-xeon-bf16-widened.md).
      return blocked_gemm_available() && std::min({m, n, k}) >= 128;
    case Bf16Products::onednn:
      break;
  }
  return false;
}

#if defined(__AVX512BF16__) && defined(__AVX512BW__)

namespace {

using blocked::Epilogue;
using blocked::lanes;

// The bf16 at [0, count) of 32, any count.
inline __mmask32 halves(int64_t count) {
  const int64_t n = std::clamp<int64_t>(count, 0, 32);
  return n == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u);
}

// 16 pairs (x[i], y[i]) from 16 bf16 of each of two lines: x in the low halves. (The zero-masked
// forms with every lane set: GCC 12 warns of the plain forms' undefined pass-through register.)
inline __m512i interleave(__m256i x, __m256i y) {
  constexpr __mmask16 kAll = 0xffff;
  return _mm512_or_si512(_mm512_maskz_cvtepu16_epi32(kAll, x),
                         _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, y), 16));
}

// The first `count` (<= 16) of 16 bf16 at p.
inline __m256i load_16(const bf16* p, int64_t count) {
  return _mm256_maskz_loadu_epi16(lanes(count), p);
}

// `count` (<= 16) lines `stride` apart, each with its pairs contiguous: their first 16 pairs (the
// bf16 [0, depth) of each, zero beyond: an odd depth's last pair has a zero high half), transposed:
// r[q] = pair q of each line.
inline void load_pairs_transposed(const bf16* p, int64_t stride, int64_t count, int64_t depth,
                                  __m512 r[16]) {
  for (int i = 0; i < 16; ++i)
    r[i] = i < count ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(halves(depth), p + i * stride))
                     : _mm512_setzero_ps();
  blocked::transpose_16x16(r);
}

struct Bf16Kernel {
  using Source = bf16;
  using Packed = uint32_t;
  // The same tile and blocks as the f32 kernel, in bytes: a depth block of 512 bf16 is 256 pairs,
  // so a's 14-row micro-panel is 14 KiB (in L1) and b's block 512 KiB (in L2).
  static constexpr int64_t kMr = 14;
  static constexpr int64_t kNr = 32;
  static constexpr int64_t kKc = 512;
  static constexpr int64_t kMc = 6 * kMr;
  static constexpr int64_t kNc = 16 * kNr;

  static int64_t packed_depth(int64_t depth) { return (depth + 1) / 2; }

  // a's rows [0, rows) and depths [0, depth) into micro-panels of kMr rows: panel p at
  // out + p * pairs * kMr holds [pairs][kMr] (pairs = depth rounded up to even, halved).
  static void pack_a(StridedBf16Matrix a, int64_t rows, int64_t depth, uint32_t* out) {
    const int64_t pairs = (depth + 1) / 2;
    if (a.col_stride != 1 && a.row_stride == 1) {
      // Columns contiguous (a = g^T): two depths' columns read together from start to end, their
      // rows interleaved into pairs, the pieces copied to every panel.
      for (int64_t q = 0; q < pairs; ++q) {
        const bf16* even = a.data + 2 * q * a.col_stride;
        const bf16* odd = 2 * q + 1 < depth ? even + a.col_stride : nullptr;
        blocked::prefetch_span(even + blocked::kPackAheadDepths * a.col_stride, rows);
        blocked::prefetch_span(even + (blocked::kPackAheadDepths + 1) * a.col_stride, rows);
        for (int64_t i0 = 0; i0 < rows; i0 += kMr) {
          const int64_t count = std::min(kMr, rows - i0);
          const __m256i x = load_16(even + i0, count);
          const __m256i y = odd ? load_16(odd + i0, count) : _mm256_setzero_si256();
          _mm512_mask_storeu_epi32(out + i0 * pairs + q * kMr, lanes(kMr), interleave(x, y));
        }
      }
      return;
    }
    // Rows contiguous: each row's pairs are 32-bit words already; transpose 16 x 16 of them, the
    // next panel's rows asked for at the same depths (blocked::prefetch_rows).
    for (int64_t i0 = 0; i0 < rows; i0 += kMr, out += pairs * kMr) {
      const bf16* src = a.data + i0 * a.row_stride;
      for (int64_t k0 = 0; k0 < depth; k0 += 32) {
        __m512 r[16];
        blocked::prefetch_rows(src + kMr * a.row_stride + k0, a.row_stride, kMr);
        load_pairs_transposed(src + k0, a.row_stride, std::min(kMr, rows - i0), depth - k0, r);
        for (int64_t q = 0; q < std::min<int64_t>(16, (depth - k0 + 1) / 2); ++q)
          _mm512_mask_storeu_ps(reinterpret_cast<float*>(out + (k0 / 2 + q) * kMr), lanes(kMr),
                                r[q]);
      }
    }
  }

  // b's depths [0, depth) and columns [0, cols) into micro-panels of kNr columns: panel p at
  // out + p * pairs * kNr holds [pairs][kNr]. `out` is 64-byte aligned.
  static void pack_b(StridedBf16Matrix b, int64_t depth, int64_t cols, uint32_t* out) {
    const int64_t pairs = (depth + 1) / 2;
    if (b.col_stride == 1) {
      // Rows contiguous: two rows read together from start to end, interleaved into pairs, the
      // two kPackAheadDepths further on asked for.
      for (int64_t q = 0; q < pairs; ++q) {
        const bf16* even = b.data + 2 * q * b.row_stride;
        const bf16* odd = 2 * q + 1 < depth ? even + b.row_stride : nullptr;
        blocked::prefetch_span(even + blocked::kPackAheadDepths * b.row_stride, cols);
        blocked::prefetch_span(even + (blocked::kPackAheadDepths + 1) * b.row_stride, cols);
        for (int64_t j0 = 0; j0 < cols; j0 += kNr) {
          uint32_t* panel_row = out + j0 * pairs + q * kNr;
          for (int64_t half = 0; half < 2; ++half) {
            const int64_t count = std::clamp<int64_t>(cols - j0 - 16 * half, 0, 16);
            const __m256i x = load_16(even + j0 + 16 * half, count);
            const __m256i y = odd ? load_16(odd + j0 + 16 * half, count) : _mm256_setzero_si256();
            _mm512_store_si512(panel_row + 16 * half, interleave(x, y));
          }
        }
      }
      return;
    }
    // Columns contiguous (b = W^T): each column's pairs are words; transpose 16 x 16 of them.
    for (int64_t j0 = 0; j0 < cols; j0 += kNr, out += pairs * kNr) {
      const bf16* src = b.data + j0 * b.col_stride;
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t count = std::clamp<int64_t>(cols - j0 - 16 * half, 0, 16);
        for (int64_t k0 = 0; k0 < depth; k0 += 32) {
          __m512 r[16];
          load_pairs_transposed(src + 16 * half * b.col_stride + k0, b.col_stride, count,
                                depth - k0, r);
          for (int64_t q = 0; q < std::min<int64_t>(16, (depth - k0 + 1) / 2); ++q)
            _mm512_store_ps(reinterpret_cast<float*>(out + (k0 / 2 + q) * kNr + 16 * half), r[q]);
        }
      }
    }
  }

  // c's tile [rows][columns] (rows <= 14, columns <= 32) from a's micro-panel [pairs][14] and b's
  // [pairs][32]: 28 accumulators, two loads of b and 14 broadcasts of a's pairs per two depths.
  static void micro_kernel(int64_t pairs, const uint32_t* a, const uint32_t* b, float* c,
                           int64_t ldc, int64_t rows, int64_t columns, const Epilogue& epilogue) {
    __m512 acc[kMr][2];
#pragma GCC unroll 14
    for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    if (c) blocked::prefetch_tile(c, ldc, rows);  // null: the tile goes to bf16 (Epilogue)
    for (int64_t q = 0; q < pairs; ++q, a += kMr, b += kNr) {
      const __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 16);
#pragma GCC unroll 14
      for (int r = 0; r < kMr; ++r) {
        const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], ar, b0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], ar, b1);
      }
    }
    blocked::store_tile(acc, c, ldc, rows, columns, epilogue);
  }
};

// Seconds of 4096 rounds of 12 independent chains of `step` on this thread (latency 4-6 cycles,
// 1-2 a cycle: 12 chains keep the units busy).
template <class Step>
double chain_seconds(Step step) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(i));
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 4096; ++round) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = step(acc[i]);
  }
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) asm volatile("" : : "v"(acc[i]));  // keeps the sums
  return seconds.count();
}

}  // namespace

double vdpbf16ps_to_fma_rate() {
  static const double rate = [] {
    const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    auto fma = [&](__m512 acc) { return _mm512_fmadd_ps(acc, a, b); };
    auto dot = [&](__m512 acc) { return _mm512_dpbf16_ps(acc, x, x); };
    // Alternating, the best of 8 each: the first rounds also wake the vector units.
    double fma_seconds = 1e9, dot_seconds = 1e9;
    for (int attempt = 0; attempt < 8; ++attempt) {
      fma_seconds = std::min(fma_seconds, chain_seconds(fma));
      dot_seconds = std::min(dot_seconds, chain_seconds(dot));
    }
    // vdpbf16ps does 32 multiply-adds, the FMA 16.
    return (32.0 / dot_seconds) / (16.0 / fma_seconds);
  }();
  return rate;
}

bool blocked_gemm_bf16_available() {
  return true;
}

void blocked_gemm_bf16(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a, StridedBf16Matrix b,
                       const float* bias, bool accumulate, bool relu, float* c, int64_t ldc) {
  blocked::product<Bf16Kernel>("blocked_gemm_bf16", m, n, k, a, b, bias, accumulate, relu, c, ldc);
}

int64_t blocked_gemm_bf16_rounded_most_depth() {
  return Bf16Kernel::kKc;
}

void blocked_gemm_bf16_rounded(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a,
                               StridedBf16Matrix b, const float* bias, bool relu, bf16* c,
                               int64_t ldc) {
  blocked::RoundedOutput rounded;
  rounded.c = reinterpret_cast<uint16_t*>(c);
  blocked::product<Bf16Kernel>("blocked_gemm_bf16_rounded", m, n, k, a, b, bias, false, relu,
                               nullptr, ldc, rounded);
}

void blocked_gemm_bf16_relu_backward(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a,
                                     StridedBf16Matrix b, const bf16* relu_mask, bf16* c,
                                     int64_t ldc, float* column_sums, bool accumulate_sums) {
  if (column_sums && !accumulate_sums) std::fill(column_sums, column_sums + n, 0.0f);
  blocked::RoundedOutput rounded;
  rounded.c = reinterpret_cast<uint16_t*>(c);
  rounded.relu_mask = reinterpret_cast<const uint16_t*>(relu_mask);
  rounded.column_sums = column_sums;
  blocked::product<Bf16Kernel>("blocked_gemm_bf16_relu_backward", m, n, k, a, b, nullptr, false,
                               false, nullptr, ldc, rounded);
}

#else  // no AVX512-BF16: cpu::gemm keeps oneDNN's bf16 products

double vdpbf16ps_to_fma_rate() {
  return 0;
}

bool blocked_gemm_bf16_available() {
  return false;
}

void blocked_gemm_bf16(int64_t, int64_t, int64_t, StridedBf16Matrix, StridedBf16Matrix,
                       const float*, bool, bool, float*, int64_t) {
  fail("blocked_gemm_bf16: this build has no AVX512-BF16 (blocked_gemm_bf16_available() is false)");
}

int64_t blocked_gemm_bf16_rounded_most_depth() {
  return 0;
}

void blocked_gemm_bf16_relu_backward(int64_t, int64_t, int64_t, StridedBf16Matrix,
                                     StridedBf16Matrix, const bf16*, bf16*, int64_t, float*, bool) {
  fail(
      "blocked_gemm_bf16_relu_backward: this build has no AVX512-BF16 "
      "(blocked_gemm_bf16_available() is false)");
}

void blocked_gemm_bf16_rounded(int64_t, int64_t, int64_t, StridedBf16Matrix, StridedBf16Matrix,
                               const float*, bool, bf16*, int64_t) {
  fail(
      "blocked_gemm_bf16_rounded: this build has no AVX512-BF16 (blocked_gemm_bf16_available() is "
      "false)");
}

#endif

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
