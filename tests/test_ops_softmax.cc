#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/kernels/cpu/vector_math.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_f32_values;
using testing::Values;

// Double-precision softmax over rows of width n, max-subtracted.
Values softmax_reference(const Values& x, size_t n) {
  Values y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    const double* xr = x.data() + r * n;
    double max = *std::max_element(xr, xr + n), sum = 0;
    for (size_t j = 0; j < n; ++j) sum += std::exp(xr[j] - max);
    for (size_t j = 0; j < n; ++j) y[r * n + j] = std::exp(xr[j] - max) / sum;
  }
  return y;
}

void check_softmax(const Shape& shape, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  const size_t n = static_cast<size_t>(shape[-1]);
  testing::check_op(
      {{shape, random_f32_values(shape.numel(), rng, lo, hi)}},
      [](const std::vector<Tensor>& t) { return ops::softmax(t[0]); },
      [n](const std::vector<Values>& v) { return softmax_reference(v[0], n); });
}

TEST(OpsSoftmax, ForwardAndGradients) {
  unsigned seed = 71;
  for (const Shape& shape : {Shape{5}, Shape{3, 7}, Shape{2, 3, 19}, Shape{2, 40}}) {
    SCOPED_TRACE(shape.str());
    check_softmax(shape, -3.0, 3.0, seed++);
  }
}

// exp(1000) overflows f32 (and double); the max subtraction keeps every exponent <= 0.
TEST(OpsSoftmax, StableForLargeMagnitudeInputs) {
  check_softmax(Shape{4, 9}, 995.0, 1005.0, 72);
  check_softmax(Shape{4, 9}, -1005.0, -995.0, 73);
  std::mt19937 rng(74);
  Values x = random_f32_values(4 * 33, rng, -1e4, 1e4);
  Tensor y = ops::softmax(Tensor::from_floats({4, 33}, testing::to_float_vector(x)));
  testing::expect_close(y.to_floats(), softmax_reference(x, 33), 1e-5, 1e-6,
                        "softmax of inputs in [-1e4, 1e4]");
}

// -inf entries (masked positions) get exactly zero weight.
TEST(OpsSoftmax, NegativeInfinityGetsExactlyZero) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor y = ops::softmax(Tensor::from_floats({2, 3}, {0.0f, -inf, 0.0f, -inf, 2.0f, -inf}));
  EXPECT_EQ(y.to_floats(), (std::vector<float>{0.5f, 0.0f, 0.5f, 0.0f, 1.0f, 0.0f}));
}

TEST(OpsSoftmax, LargeInputMatchesAnalyticGradient) {
  std::mt19937 rng(75);
  const int64_t rows = 130, n = 301;  // above the parallel threshold
  Values x = random_f32_values(rows * n, rng, -4.0, 4.0), g = random_f32_values(rows * n, rng);
  Tensor tx = Tensor::from_floats({rows, n}, testing::to_float_vector(x));
  tx.set_requires_grad(true);
  Tensor y = testing::forward_backward([&] { return ops::softmax(tx); }, g);
  Values expected = softmax_reference(x, n), dx(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += g[r * n + j] * expected[r * n + j];
    for (int64_t j = 0; j < n; ++j) dx[r * n + j] = expected[r * n + j] * (g[r * n + j] - dot);
  }
  testing::expect_close(y.to_floats(), expected, 1e-5, 1e-7, "forward");
  testing::expect_close(tx.grad().to_floats(), dx, 1e-4, 1e-7, "dx");
}

// The vectorised exp the softmax and cross-entropy kernels use: a relative error below 2^-23 (one
// ulp of a number in [1, 2), two at most) wherever the result is a normal float, on a dense sweep.
TEST(VectorMath, ExpIsAccurateToAnUlpOrTwo) {
  double worst = 0;
  float worst_x = 0;
  for (double v = -87.0; v < 88.0; v += 1.0 / 4096) {
    float x = static_cast<float>(v);
    double expected = std::exp(static_cast<double>(x));
    double error = std::fabs(cpu::exp_f32(x) - expected) / expected;
    if (error > worst) worst = error, worst_x = x;
  }
  EXPECT_LT(worst, 0x1p-23) << "at x = " << worst_x;
  EXPECT_EQ(cpu::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(cpu::exp_f32(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::exp_f32(-100.0f), 0.0f);
  EXPECT_EQ(cpu::exp_f32(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::exp_f32(std::nanf(""))));
}

#ifdef __AVX512F__
// exp16, the 16-lane exp of the kernels on AVX-512: within two ulp of exp(x) on the same dense
// sweep, and the same special cases as exp_f32.
TEST(VectorMath, ExpOnSixteenLanesIsAccurateToAnUlpOrTwo) {
  double worst = 0;
  float worst_x = 0;
  float xs[16], ys[16];
  for (double v = -87.0; v < 88.0; v += 16.0 / 4096) {
    for (int i = 0; i < 16; ++i) xs[i] = static_cast<float>(v + i / 4096.0);
    _mm512_storeu_ps(ys, cpu::exp16(_mm512_loadu_ps(xs)));
    for (int i = 0; i < 16; ++i) {
      double expected = std::exp(static_cast<double>(xs[i]));
      double error = std::fabs(ys[i] - expected) / expected;
      if (error > worst) worst = error, worst_x = xs[i];
    }
  }
  EXPECT_LT(worst, 0x1p-23) << "at x = " << worst_x;
  const float inf = std::numeric_limits<float>::infinity();
  const float special[16] = {0.0f,  -inf, -100.0f, 100.0f, std::nanf(""), inf,   -87.5f, 88.8f,
                             -1.0f, 1.0f, -0.5f,   0.5f,   2.0f,          -2.0f, 10.0f,  -10.0f};
  _mm512_storeu_ps(ys, cpu::exp16(_mm512_loadu_ps(special)));
  EXPECT_EQ(ys[0], 1.0f);
  EXPECT_EQ(ys[1], 0.0f);
  EXPECT_EQ(ys[2], 0.0f);
  EXPECT_EQ(ys[3], inf);
  EXPECT_TRUE(std::isnan(ys[4]));
  EXPECT_EQ(ys[5], inf);
  EXPECT_EQ(ys[6], 0.0f);
  EXPECT_EQ(ys[7], inf);
  for (int i = 8; i < 16; ++i)
    EXPECT_NEAR(ys[i], std::exp(static_cast<double>(special[i])), 2e-7 * std::exp(special[i]));
}

// exp16_at_most_zero, sum_exp's exponential (its arguments are x - max x): exp16's bits for every
// argument at most 0, swept over the bit patterns of the negative floats from -0 to -inf (every
// 61st, with the boundaries of exp16's clamp, denormals and NaN besides).
TEST(VectorMath, ExpAtMostZeroHasExp16sBits) {
  std::vector<float> xs;
  for (uint64_t bits = 0x80000000u; bits <= 0xff800000u; bits += 61)
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  const float inf = std::numeric_limits<float>::infinity();
  const float min_arg = -87.33654475f;
  for (float x : {0.0f, -0.0f, -inf, std::nanf(""), -std::nanf(""), min_arg,
                  std::nextafter(min_arg, 0.0f), std::nextafter(min_arg, -inf), -88.0f,
                  -std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::min(),
                  -1e-30f, -103.9f, -1e30f, -std::numeric_limits<float>::max()})
    xs.push_back(x);
  while (xs.size() % 16 != 0) xs.push_back(-1.0f);
  int64_t nonzero = 0;
  for (size_t i = 0; i < xs.size(); i += 16) {
    uint32_t want[16], got[16];
    const __m512 x = _mm512_loadu_ps(xs.data() + i);
    _mm512_storeu_si512(want, _mm512_castps_si512(cpu::exp16(x)));
    _mm512_storeu_si512(got, _mm512_castps_si512(cpu::exp16_at_most_zero(x)));
    for (int lane = 0; lane < 16; ++lane) {
      ASSERT_EQ(got[lane], want[lane]) << "x = " << xs[i + lane];
      nonzero += got[lane] != 0;
    }
  }
  EXPECT_GT(xs.size(), 20000000u);
  EXPECT_GT(nonzero, 1000000);
}
#endif

// max_of and sum_exp over every length from 0 to 40 (whole registers and every partial last one)
// against double sums; y = e^{x - shift} stored where asked, nothing written past n.
TEST(VectorMath, MaxAndSumOfExponentialsOverAnyLength) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-20.0f, 5.0f);
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = uniform(rng);
    float expected_max = -std::numeric_limits<float>::infinity();
    for (float v : x) expected_max = std::max(expected_max, v);
    EXPECT_EQ(cpu::max_of(x.data(), n), expected_max) << "n = " << n;
    const float shift = 1.5f;
    // The kernels compute e^{x - shift} of the float difference, as the scalar loops did.
    auto expected_exp = [&](float v) { return std::exp(static_cast<double>(v - shift)); };
    double expected_sum = 0;
    for (float v : x) expected_sum += expected_exp(v);
    EXPECT_NEAR(cpu::sum_exp(x.data(), n, shift), expected_sum, 1e-6 * expected_sum + 1e-30)
        << "n = " << n;
    std::vector<float> y(static_cast<size_t>(n) + 1, -7.0f);
    const float sum = cpu::sum_exp(x.data(), n, shift, y.data());
    EXPECT_NEAR(sum, expected_sum, 1e-6 * expected_sum + 1e-30) << "n = " << n;
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(y[static_cast<size_t>(j)], expected_exp(x[j]), 3e-7 * expected_exp(x[j]));
    EXPECT_EQ(y[static_cast<size_t>(n)], -7.0f) << "written past the end, n = " << n;
  }
  // A row of -inf only (a fully masked row): the maximum is -inf.
  const float masked[3] = {-std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  EXPECT_EQ(cpu::max_of(masked, 3), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::sum_exp(masked, 3, 0.0f), 0.0f);
}

TEST(OpsSoftmax, BadArgumentsThrow) {
  EXPECT_THROW(ops::softmax(Tensor::zeros({2, 3}, DType::i32)), Error);
  EXPECT_THROW(ops::softmax(Tensor::full(Shape{}, 1.0f)), Error);
  EXPECT_THROW(ops::softmax(Tensor::zeros({2, 0})), Error);
  EXPECT_THROW(ops::softmax(Tensor()), Error);
}

}  // namespace
}  // namespace tfm::internal
