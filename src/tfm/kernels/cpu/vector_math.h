// Single-precision math that vectorises. std::exp is a scalar libm call that GCC does not vectorise
// without -ffast-math; exp_f32 is branch-free arithmetic, so a loop over it compiles to AVX-512.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace tfm::cpu {

// e^x within about 1 ulp (Cephes expf): x = n ln2 + r with |r| <= ln2/2, e^r from a degree-6
// polynomial, 2^n put into the exponent bits. Results below the smallest normal float (x < -87.34)
// flush to 0, so softmax over -inf entries gives exact zeros; x > 88.72 gives +inf; NaN stays NaN.
inline float exp_f32(float x) {
  constexpr float kMinArg = -87.33654475f;  // log(2^-126)
  constexpr float kMaxArg = 88.72283905f;   // log(FLT_MAX)
  constexpr float kLog2e = 1.44269504088896341f;
  // ln2 split in two so that n * kLn2Hi is exact for |n| <= 128.
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
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
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float two_n = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  float y = p * two_n;
  y = x < kMinArg ? 0.0f : y;
  y = x > kMaxArg ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

}  // namespace tfm::cpu
