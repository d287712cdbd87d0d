#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/kernels/cpu/vector_math.h"
#include "tfm/ops/ops.h"

namespace tfm {
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

TEST(OpsSoftmax, BadArgumentsThrow) {
  EXPECT_THROW(ops::softmax(Tensor::zeros({2, 3}, DType::i32)), Error);
  EXPECT_THROW(ops::softmax(Tensor::full(Shape{}, 1.0f)), Error);
  EXPECT_THROW(ops::softmax(Tensor::zeros({2, 0})), Error);
  EXPECT_THROW(ops::softmax(Tensor()), Error);
}

}  // namespace
}  // namespace tfm
