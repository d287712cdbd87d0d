// int8 quantisation for the int8 inference products (packed_matmul_cpu.h).
//
// Rows are quantised symmetrically, each with its own scale s = max_j |x_j| / L:
//   q_j = round(x_j / s) in [-L, L],  x_j ~ s q_j.
// Weights are stored as s8 q with L = 127 (one scale per output row, fixed at load). Activations
// are quantised per row at every product and stored shifted to u8 (u_j = q_j + Z, Z = L + 1), the
// operand of the u8 x s8 products; the shift is undone with the weight rows' sums:
//   sum_j u_j w_j = sum_j q_j w_j + Z sum_j w_j.
// The activations' L and Z depend on the CPU: with AVX512-VNNI or AMX the products are exact and
// the activations take 8 bits (L 127, Z 128); without, oneDNN adds u8 x s8 pairs in saturating
// 16-bit sums (vpmaddubsw), and 8-bit activations could overflow them (2 x 255 x 127 > 32767), so
// they take 7 bits (L 63, Z 64: a pair is at most 2 x 127 x 127 = 32258).
#pragma once

#include <cstdint>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

inline constexpr int32_t kWeightLevels = 127;
inline constexpr int32_t kNativeZeroPoint = 128;     // 8-bit activations
inline constexpr int32_t kSaturatingZeroPoint = 64;  // 7-bit activations

// Whether oneDNN multiplies u8 x s8 without saturating here: the CPU has AVX512-VNNI (or AMX) and
// TFM_CPU_ISA has not capped oneDNN below it.
bool native_int8_products();

// The activations' zero point Z on this CPU: kNativeZeroPoint where native_int8_products(), else
// kSaturatingZeroPoint. Their levels are Z - 1.
int32_t activation_zero_point();

// q [rows, cols] (s8, row-major) and scales [rows] of x [rows, cols]; an all-zero row gets scale 0
// and q = 0; a row holding a NaN gets scale NaN and q = 0, so that its products come out NaN.
void quantize_rows_s8(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scales);

// u = q + Z [rows, cols] (u8, q in [1 - Z, Z - 1]) and scales [rows] of x [rows, cols]: the
// activations' form, Z = zero_point (64 or 128). Runs on all threads unless called inside a
// parallel region.
void quantize_rows_u8(const float* x, int64_t rows, int64_t cols, uint8_t* u, float* scales,
                      int32_t zero_point = activation_zero_point());

// One row of quantize_rows_u8, on the calling thread: u [cols] and the row's scale (returned),
// for a caller that quantises rows inside a parallel region of its own. zero_point: as
// quantize_rows_u8's, not checked here.
float quantize_row_u8(const float* x, int64_t cols, uint8_t* u, int32_t zero_point);

// y [rows, n] = (acc - Z row_sums[j]) x_scales[i] w_scales[j] + bias[j] (bias optional), then
// max(0, y) when relu. acc [rows, n] is the s32 product of u (quantised with zero point Z) and the
// s8 weights; y may alias it.
void dequantize_product(const int32_t* acc, int64_t rows, int64_t n, const float* x_scales,
                        const float* w_scales, const int32_t* w_row_sums, const float* bias,
                        bool relu, float* y, int32_t zero_point = activation_zero_point());

#ifdef __AVX512F__
// dequantize_product's arithmetic on 16 columns of a row (mask: those that exist; acc their s32
// sums, the other pointers at their first column, zero_point_shift log2 Z in every lane). The bias
// is added with an explicit FMA, (acc - Z sums) s_x s_w + bias rounded once, so that every caller
// and every column rounds alike, whatever the compiler contracts elsewhere.
inline __m512 dequantize16(__m512i acc, __mmask16 mask, const int32_t* w_row_sums,
                           const float* w_scales, const float* bias, __m512 x_scale,
                           __m512i zero_point_shift, bool relu) {
  const __m512i shifted = _mm512_sub_epi32(
      acc,
      _mm512_maskz_sllv_epi32(mask, _mm512_maskz_loadu_epi32(mask, w_row_sums), zero_point_shift));
  const __m512 product = _mm512_maskz_cvtepi32_ps(mask, shifted);
  const __m512 scale = _mm512_mul_ps(x_scale, _mm512_maskz_loadu_ps(mask, w_scales));
  __m512 v = bias ? _mm512_fmadd_ps(product, scale, _mm512_maskz_loadu_ps(mask, bias))
                  : _mm512_mul_ps(product, scale);
  // max returns its second operand for a NaN: NaN -> 0, as relu.
  if (relu) v = _mm512_maskz_max_ps(mask, v, _mm512_setzero_ps());
  return v;
}
#endif

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
