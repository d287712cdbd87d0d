#include "tfm/kernels/cpu/quantize_cpu.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/core/error.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// Enough work to share between threads (parallel.h), outside another parallel region (the output
// layer's blocks call the epilogue from inside one).
bool worth_threads(int64_t elements) {
  return !omp_in_parallel() && elements >= kParallelMinElements;
}

// max_j |x_j| / levels, or NaN when the row holds a NaN: the vector max returns its second operand
// when either is NaN, so a NaN would be kept or dropped depending on where it sits in the row, and
// the row's product would come out finite and wrong. A NaN scale makes the row's outputs NaN (as
// the f32 product's): its q are written as 0, and dequantize_product multiplies by the scale.
//
// With AVX-512 the maximum is taken over the magnitudes' bit patterns as signed integers (the sign
// bit cleared): for floats that are not NaN their order is the order of the magnitudes, and every
// NaN's pattern (exponent all ones, fraction not 0) lies above +inf's (0x7f800000). One integer
// maximum a vector thus finds the largest magnitude, which is one of the row's values, and any
// NaN, where a float maximum would need a compare for the NaNs beside it.
float row_scale(const float* x, int64_t cols, int32_t levels) {
  int64_t j = 0;
#ifdef __AVX512F__
  // (The zero-masked forms: GCC 12 warns that the unmasked ones read an uninitialised register.)
  const __m512i magnitude_bits = _mm512_set1_epi32(0x7fffffff);
  auto bits_of = [&](const float* at) {
    return _mm512_maskz_and_epi32(kAllLanes, _mm512_loadu_si512(at), magnitude_bits);
  };
  auto max_of = [](__m512i a, __m512i b) { return _mm512_maskz_max_epi32(kAllLanes, a, b); };
  // Four maxima 64 columns at a time, so that the chain of maxima does not bound the loop; the
  // maximum does not depend on the order.
  __m512i max4[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                     _mm512_setzero_si512()};
  for (; j + 64 <= cols; j += 64)
    for (int c = 0; c < 4; ++c) max4[c] = max_of(max4[c], bits_of(x + j + 16 * c));
  __m512i max16 = max_of(max_of(max4[0], max4[1]), max_of(max4[2], max4[3]));
  for (; j + 16 <= cols; j += 16) max16 = max_of(max16, bits_of(x + j));
  if (j < cols) {
    const __m512i tail = _mm512_maskz_and_epi32(
        kAllLanes, _mm512_maskz_loadu_epi32(first_lanes(cols - j), x + j), magnitude_bits);
    max16 = max_of(max16, tail);  // the missing lanes read as +0
  }
  // The 16 lanes' maximum, by halves.
  const __m256i half = _mm256_max_epi32(_mm512_maskz_extracti64x4_epi64(0xf, max16, 0),
                                        _mm512_maskz_extracti64x4_epi64(0xf, max16, 1));
  __m128i quarter = _mm_max_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  quarter = _mm_max_epi32(quarter, _mm_shuffle_epi32(quarter, 0x4e));
  quarter = _mm_max_epi32(quarter, _mm_shuffle_epi32(quarter, 0xb1));
  const auto largest = static_cast<uint32_t>(_mm_cvtsi128_si32(quarter));
  if (largest > 0x7f800000u) return std::numeric_limits<float>::quiet_NaN();
  return std::bit_cast<float>(largest) / static_cast<float>(levels);
#else
  float max_abs = 0.0f;
  bool has_nan = false;
  for (; j < cols; ++j) {
    has_nan = has_nan || std::isnan(x[j]);
    max_abs = std::max(max_abs, std::fabs(x[j]));
  }
  return has_nan ? std::numeric_limits<float>::quiet_NaN() : max_abs / static_cast<float>(levels);
#endif
}

// round(x / scale) clamped to [-levels, levels] (+ shift), ties to even: the CPU's rounding mode
// (vcvtps2dq; std::nearbyint in the scalar tail).
template <typename Out>
void quantize_row(const float* x, int64_t cols, float scale, int32_t levels, int32_t shift,
                  Out* q) {
  const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  const float bound = static_cast<float>(levels);
  int64_t j = 0;
#ifdef __AVX512F__
  const __m512 inverse16 = _mm512_set1_ps(inverse);
  const __m512 low = _mm512_set1_ps(-bound), high = _mm512_set1_ps(bound);
  const __m512i shift16 = _mm512_set1_epi32(shift);
  for (; j + 16 <= cols; j += 16) {
    const __m512 v = _mm512_maskz_min_ps(
        kAllLanes,
        _mm512_maskz_max_ps(kAllLanes, _mm512_mul_ps(_mm512_loadu_ps(x + j), inverse16), low),
        high);
    const __m512i rounded =
        _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAllLanes, v), shift16);  // u8 or s8
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + j),
                     _mm512_maskz_cvtepi32_epi8(kAllLanes, rounded));
  }
#endif
  for (; j < cols; ++j) {
    const float v = std::min(bound, std::max(-bound, x[j] * inverse));
    q[j] = static_cast<Out>(static_cast<int32_t>(std::nearbyint(v)) + shift);
  }
}

// One row: its scale, then its q (0 for a NaN scale).
template <typename Out>
float quantize_scaled_row(const float* x, int64_t cols, int32_t levels, int32_t shift, Out* q) {
  const float scale = row_scale(x, cols, levels);
  if (std::isnan(scale))
    std::fill(q, q + cols, static_cast<Out>(shift));  // q = 0
  else
    quantize_row<Out>(x, cols, scale, levels, shift, q);
  return scale;
}

template <typename Out>
void quantize_rows(const float* x, int64_t rows, int64_t cols, int32_t levels, int32_t shift,
                   Out* q, float* scales) {
#pragma omp parallel for schedule(static) if (worth_threads(rows * cols))
  for (int64_t i = 0; i < rows; ++i)
    scales[i] = quantize_scaled_row<Out>(x + i * cols, cols, levels, shift, q + i * cols);
}

void check_zero_point(int32_t zero_point) {
  TFM_CHECK(zero_point == kNativeZeroPoint || zero_point == kSaturatingZeroPoint,
            "int8: activation zero point {} (must be {} or {})", zero_point, kNativeZeroPoint,
            kSaturatingZeroPoint);
}

}  // namespace

bool native_int8_products() {
  // oneDNN's instruction set as this CPU and TFM_CPU_ISA's cap (isa_dispatch.h) leave it: a level
  // forced below avx512-bf16 caps oneDNN below VNNI, where its u8 x s8 products (gemm:jit) add
  // pairs in saturating 16-bit sums even on a CPU with VNNI. Asked once, as onednn_uses_amx():
  // the answer fixes oneDNN's ISA for the process.
  constexpr auto kVnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
  static const bool native =
      (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & kVnni) == kVnni;
  return native;
}

int32_t activation_zero_point() {
  return native_int8_products() ? kNativeZeroPoint : kSaturatingZeroPoint;
}

void quantize_rows_s8(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scales) {
  quantize_rows<int8_t>(x, rows, cols, kWeightLevels, 0, q, scales);
}

void quantize_rows_u8(const float* x, int64_t rows, int64_t cols, uint8_t* u, float* scales,
                      int32_t zero_point) {
  check_zero_point(zero_point);
  quantize_rows<uint8_t>(x, rows, cols, zero_point - 1, zero_point, u, scales);
}

float quantize_row_u8(const float* x, int64_t cols, uint8_t* u, int32_t zero_point) {
  return quantize_scaled_row<uint8_t>(x, cols, zero_point - 1, zero_point, u);
}

void dequantize_product(const int32_t* acc, int64_t rows, int64_t n, const float* x_scales,
                        const float* w_scales, const int32_t* w_row_sums, const float* bias,
                        bool relu, float* y, int32_t zero_point) {
  check_zero_point(zero_point);
  [[maybe_unused]] const int log2_zero_point =
      std::countr_zero(static_cast<uint32_t>(zero_point));  // 6 or 7
#pragma omp parallel for schedule(static) if (worth_threads(rows * n))
  for (int64_t i = 0; i < rows; ++i) {
    const int32_t* a = acc + i * n;
    float* out = y + i * n;
    const float xs = x_scales[i];
    int64_t j = 0;
#ifdef __AVX512F__
    // One pass: the zero point undone (x Z as a shift), both scales, the bias and ReLU, the last
    // columns under a mask.
    const __m512 xs16 = _mm512_set1_ps(xs);
    const __m512i zero_point_shift = _mm512_set1_epi32(log2_zero_point);
    for (; j < n; j += 16) {
      const __mmask16 mask = j + 16 <= n ? kAllLanes : first_lanes(n - j);
      _mm512_mask_storeu_ps(
          out + j, mask,
          dequantize16(_mm512_maskz_loadu_epi32(mask, a + j), mask, w_row_sums + j, w_scales + j,
                       bias ? bias + j : nullptr, xs16, zero_point_shift, relu));
    }
#endif
    for (; j < n; ++j) {
      float v = static_cast<float>(a[j] - zero_point * w_row_sums[j]) * (xs * w_scales[j]);
      if (bias) v += bias[j];
      if (relu) v = v > 0.0f ? v : 0.0f;  // NaN -> 0, as relu
      out[j] = v;
    }
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
