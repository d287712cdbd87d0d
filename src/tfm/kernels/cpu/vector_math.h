// Single-precision math that vectorises. std::exp is a scalar libm call that GCC does not vectorise
// without -ffast-math; exp_f32 is branch-free arithmetic, so a loop over it compiles to AVX-512.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The constants of exp_f32 and exp16 (Cephes expf).
namespace exp_constants {
constexpr float kMinArg = -87.33654475f;  // log(2^-126)
constexpr float kMaxArg = 88.72283905f;   // log(FLT_MAX)
constexpr float kLog2e = 1.44269504088896341f;
// ln2 split in two so that n * kLn2Hi is exact for |n| <= 128.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
// e^r = 1 + r + r^2 (P0 r^5 + P1 r^4 + ... + P5) for |r| <= ln2/2.
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_constants

// e^x within about 1 ulp (Cephes expf): x = n ln2 + r with |r| <= ln2/2, e^r from a degree-6
// polynomial, 2^n put into the exponent bits. Results below the smallest normal float (x < -87.34)
// flush to 0, so softmax over -inf entries gives exact zeros; x > 88.72 gives +inf; NaN stays NaN.
inline float exp_f32(float x) {
  using namespace exp_constants;
  float xc = x < kMinArg ? kMinArg : (x > kMaxArg ? kMaxArg : x);
  // Rounds to the nearest integer by adding and removing 1.5 * 2^23 (std::nearbyint and std::floor
  // do not vectorise without -fno-trapping-math).
  constexpr float kRoundMagic = 12582912.0f;
  float n = (xc * kLog2e + kRoundMagic) - kRoundMagic;
  // 2^n must stay a normal float: n in [-126, 127]. At the top end r then reaches ln2, where the
  // polynomial is still accurate to a few ulp.
  n = n > 127.0f ? 127.0f : n;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP[0];
  for (int i = 1; i < 6; ++i) p = p * r + kP[i];
  p = p * r * r + r + 1.0f;
  float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  float y = p * two_n;
  y = x < kMinArg ? 0.0f : y;
  y = x > kMaxArg ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

// GELU's constants: 1 / sqrt 2, and the coefficients P of Numerical Recipes' fit of erfc,
// erfc(z) = t exp(-z^2 + P(t)) with t = 1 / (1 + z/2) for z >= 0 (elementwise_cpu.cc's gelu_value).
namespace gelu_constants {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kErfcP[10] = {-1.26551223f, 1.00002368f,  0.37409196f, 0.09678418f,  -0.18628806f,
                              0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
}  // namespace gelu_constants

#ifdef __AVX512F__
constexpr __mmask16 kAllLanes = 0xffff;

// p 2^n = e^x for x in [-87.34, 88.72] (and NaN): n = round(x / ln2), and p = e^r for r = x - n ln2
// from exp_f32's polynomial, with 2^n by vscalefps (zero where in_range is off). exp16's and
// exp16_at_most_zero's common part.
inline __m512 exp16_scaled(__m512 x, __mmask16 in_range) {
  using namespace exp_constants;
  const __m512 n = _mm512_maskz_roundscale_ps(kAllLanes, _mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[i]));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(in_range, p, n);
}

// exp_f32 on 16 lanes, with the same reduction and polynomial, written out: the rounding by
// vrndscaleps and 2^n by vscalefps, where the compiler's version of exp_f32 adds and removes a
// magic number, builds 2^n in the exponent bits and turns each select into a masked move. Same
// special cases: 0 below -87.34 (and for -inf), +inf above 88.72, NaN stays NaN.
inline __m512 exp16(__m512 x) {
  using namespace exp_constants;
  const __m512 min_arg = _mm512_set1_ps(kMinArg), max_arg = _mm512_set1_ps(kMaxArg);
  // max/min return their second operand when either is NaN: a NaN x stays NaN through the clamp.
  // (The zero-masked forms throughout: GCC 12 warns that the unmasked ones read an uninitialised
  // register.)
  const __m512 xc =
      _mm512_maskz_min_ps(kAllLanes, max_arg, _mm512_maskz_max_ps(kAllLanes, min_arg, x));
  // Lanes at or above the lower limit, or NaN (an unordered compare is true), keep p * 2^n.
  const __m512 y = exp16_scaled(xc, _mm512_cmp_ps_mask(x, min_arg, _CMP_NLT_UQ));
  const __mmask16 overflow = _mm512_cmp_ps_mask(x, max_arg, _CMP_GT_OQ);
  return _mm512_mask_mov_ps(y, overflow, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
}

// exp16 for arguments at most 0 (and -inf and NaN), such as z - max z, with exp16's bits: without
// its clamps and its overflow select, which change nothing there. 13 vector operations instead of
// 17: the reduction takes the unclamped x (a lane below -87.34 is zeroed by the same mask as in
// exp16, whatever its n and r), and no lane can overflow. Above 0 the result is not exp16's.
inline __m512 exp16_at_most_zero(__m512 x) {
  return exp16_scaled(x,
                      _mm512_cmp_ps_mask(x, _mm512_set1_ps(exp_constants::kMinArg), _CMP_NLT_UQ));
}

// swish x sigmoid(x) = x / (1 + e^-x) on 16 lanes, as x * (1 / (1 + exp16(-x))): the swish kernel
// and the products that apply swish in their stores both use it, so their bits are the same.
inline __m512 swish16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 minus_x = _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  return _mm512_mul_ps(x, _mm512_div_ps(one, _mm512_add_ps(one, exp16(minus_x))));
}

// GELU x Phi(x) on 16 lanes, gelu_value's formula (elementwise_cpu.cc) with exp16: 2 Phi(x) =
// erfc(|x| / sqrt 2) for x < 0 and 2 - that for x >= 0, erfc(z) = t e^(P(t) - x^2/2). The gelu
// kernel and the products that apply GELU in their stores both use it, so their bits are the same.
inline __m512 gelu16(__m512 x) {
  using namespace gelu_constants;
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t =
      _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.5f * kInvSqrt2), _mm512_abs_ps(x), one));
  __m512 p = _mm512_set1_ps(kErfcP[9]);
  for (int i = 8; i >= 0; --i) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kErfcP[i]));
  const __m512 half_x = _mm512_mul_ps(_mm512_set1_ps(0.5f), x);
  // P(t) - x^2/2 in one rounding.
  const __m512 erfc_abs = _mm512_mul_ps(t, exp16(_mm512_fnmadd_ps(half_x, x, p)));
  const __mmask16 non_negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
  const __m512 twice_phi =
      _mm512_mask_sub_ps(erfc_abs, non_negative, _mm512_set1_ps(2.0f), erfc_abs);
  return _mm512_mul_ps(half_x, twice_phi);
}

// What a product's stores apply for `post` besides ReLU (swish16, gelu16); v as it is for none and
// ReLU, which each kernel applies itself (their NaN rules differ).
inline __m512 smooth_activation16(kernels::PostOp post, __m512 v) {
  if (post == kernels::PostOp::swish) return swish16(v);
  if (post == kernels::PostOp::gelu) return gelu16(v);
  return v;
}

// The lanes [0, count) of 16, count in [0, 16].
inline __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>((1u << count) - 1u);
}

// The lower (half 0) or upper (half 1) 8 lanes of v.
template <int half>
inline __m256 half_of(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xf, _mm512_castps_pd(v), half));
}

// v_0 + ... + v_15, as a tree of halves.
inline float horizontal_sum(__m512 v) {
  const __m256 h = _mm256_add_ps(half_of<0>(v), half_of<1>(v));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// max(v_0, ..., v_15).
inline float horizontal_max(__m512 v) {
  const __m256 h = _mm256_max_ps(half_of<0>(v), half_of<1>(v));
  __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_max_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_max_ss(q, _mm_movehdup_ps(q)));
}
#endif

// max_j x_j over x[0, n) (-inf for n = 0).
inline float max_of(const float* x, int64_t n) {
#ifdef __AVX512F__
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 acc = lowest;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) acc = _mm512_maskz_max_ps(kAllLanes, acc, _mm512_loadu_ps(x + j));
  if (j < n)
    acc = _mm512_maskz_max_ps(kAllLanes, acc,
                              _mm512_mask_loadu_ps(lowest, first_lanes(n - j), x + j));
  return horizontal_max(acc);
#else
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = x[j] > max ? x[j] : max;
  return max;
#endif
}

// sum_j e^{x_j - shift} over x[0, n); with y, also y_j = e^{x_j - shift} (y may be x). shift is at
// least every x_j: their maximum, as every caller passes (exp16_at_most_zero).
inline float sum_exp(const float* x, int64_t n, float shift, float* y = nullptr) {
#ifdef __AVX512F__
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp16_at_most_zero(_mm512_sub_ps(_mm512_loadu_ps(x + j), s));
    if (y) _mm512_storeu_ps(y + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (j < n) {
    const __mmask16 lanes = first_lanes(n - j);
    const __m512 e = exp16_at_most_zero(_mm512_sub_ps(_mm512_maskz_loadu_ps(lanes, x + j), s));
    if (y) _mm512_mask_storeu_ps(y + j, lanes, e);
    acc = _mm512_mask_add_ps(acc, lanes, acc, e);
  }
  return horizontal_sum(acc);
#else
  float sum = 0.0f;
  if (y) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      y[j] = exp_f32(x[j] - shift);
      sum += y[j];
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) sum += exp_f32(x[j] - shift);
  }
  return sum;
#endif
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
