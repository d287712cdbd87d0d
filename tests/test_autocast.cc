// Mixed precision: the bf16 conversion kernel against the scalar rounding, and ops::linear under
// AutocastScope(bf16) against a double-precision product of the bf16-rounded operands (forward and
// both gradients), plus the weight cache's lifetime.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

using testing::random_values;
using testing::Values;

double round_bf16(double v) {
  return bf16_to_float(float_to_bf16(static_cast<float>(v)));
}

Values rounded(const Values& v) {
  Values out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = round_bf16(v[i]);
  return out;
}

Tensor tensor_of(const Shape& shape, const Values& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_floats(shape, f);
}

// max |a - b| / max |b|.
double relative_error(const std::vector<float>& a, const Values& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

TEST(Autocast, ConversionKernelMatchesScalarRounding) {
  std::mt19937 rng(3);
  Values v = random_values(100000, rng, -1e3, 1e3);
  std::vector<float> src(v.begin(), v.end());
  // Ties in both directions, the largest finite value, infinities, NaN, denormals, signed zero.
  src[0] = 1.0f + std::ldexp(1.0f, -8);  // exactly halfway: rounds down to even
  src[1] = 1.0f + 3 * std::ldexp(1.0f, -8);
  src[2] = std::numeric_limits<float>::max();
  src[3] = std::numeric_limits<float>::infinity();
  src[4] = -std::numeric_limits<float>::infinity();
  src[5] = std::numeric_limits<float>::quiet_NaN();
  src[6] = std::numeric_limits<float>::denorm_min();
  src[7] = -0.0f;
  std::vector<bf16> dst(src.size());
  cpu::f32_to_bf16(src.data(), dst.data(), static_cast<int64_t>(src.size()));
  for (size_t i = 0; i < src.size(); ++i) {
    ASSERT_EQ(dst[i].bits, float_to_bf16(src[i]).bits) << "element " << i << " = " << src[i];
  }
  EXPECT_EQ(dst[0].bits, 0x3f80);
  EXPECT_EQ(dst[1].bits, 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(dst[5])));
}

// linear(x, W, b) on [rows, in] x [out, in], in double, from given (already rounded) operands.
Values linear_double(const Values& x, const Values& w, const Values& b, int64_t rows, int64_t in,
                     int64_t out) {
  Values y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[static_cast<size_t>(r * out + o)] = s;
    }
  return y;
}

TEST(Autocast, LinearUsesBf16OperandsAndF32Accumulation) {
  const int64_t rows = 37, in = 70, out = 29;
  std::mt19937 rng(5);
  Values x = random_values(rows * in, rng), w = random_values(out * in, rng);
  Values b = random_values(out, rng), g = random_values(rows * out, rng);
  Tensor xt = tensor_of({rows, in}, x), wt = tensor_of({out, in}, w), bt = tensor_of({out}, b);
  xt.set_requires_grad(true);
  wt.set_requires_grad(true);
  bt.set_requires_grad(true);

  Tape tape;
  std::vector<float> y_bf16;
  {
    TapeScope recording(tape);
    ops::AutocastScope autocast(DType::bf16);
    Tensor y = ops::linear(xt, wt, bt);
    y_bf16 = y.to_floats();
    tape.backward(y, tensor_of({rows, out}, g));
  }
  // Products of the rounded operands accumulated in f32: agrees with double to f32 accuracy...
  Values xr = rounded(x), wr = rounded(w), gr = rounded(g);
  EXPECT_LT(relative_error(y_bf16, linear_double(xr, wr, b, rows, in, out)), 1e-5);
  // ...and is measurably not the f32 product (so the bf16 path really ran).
  EXPECT_GT(relative_error(y_bf16, linear_double(x, w, b, rows, in, out)), 1e-4);

  // dx = g_r W_r, dW = g_r^T x_r, db = sum of the unrounded g.
  Values dx(static_cast<size_t>(rows * in), 0.0), dw(static_cast<size_t>(out * in), 0.0);
  Values db(static_cast<size_t>(out), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double go = gr[r * out + o];
      db[static_cast<size_t>(o)] += g[r * out + o];
      for (int64_t i = 0; i < in; ++i) {
        dx[r * in + i] += go * wr[o * in + i];
        dw[o * in + i] += go * xr[r * in + i];
      }
    }
  EXPECT_LT(relative_error(xt.grad().to_floats(), dx), 1e-5);
  EXPECT_LT(relative_error(wt.grad().to_floats(), dw), 1e-5);
  EXPECT_LT(relative_error(bt.grad().to_floats(), db), 1e-6);
  EXPECT_EQ(xt.grad().dtype(), DType::f32);
  EXPECT_EQ(wt.grad().dtype(), DType::f32);
}

TEST(Autocast, WeightsAreConvertedOncePerOutermostScope) {
  std::mt19937 rng(9);
  Tensor w = tensor_of({8, 16}, random_values(128, rng));
  EXPECT_EQ(ops::autocast_dtype(), DType::f32);
  Tensor first;
  {
    ops::AutocastScope outer(DType::bf16);
    EXPECT_EQ(ops::autocast_dtype(), DType::bf16);
    first = ops::cast_weight_bf16(w);
    {
      ops::AutocastScope inner(DType::f32);
      EXPECT_EQ(ops::autocast_dtype(), DType::f32);
      EXPECT_TRUE(ops::cast_weight_bf16(w).same_storage(first));
    }
    EXPECT_EQ(ops::autocast_dtype(), DType::bf16);
    EXPECT_TRUE(ops::cast_weight_bf16(w).same_storage(first));
  }
  EXPECT_EQ(ops::autocast_dtype(), DType::f32);
  // A weight changed between scopes (an optimizer update) is converted again.
  w.fill(2.5f);
  ops::AutocastScope next(DType::bf16);
  Tensor second = ops::cast_weight_bf16(w);
  EXPECT_FALSE(second.same_storage(first));
  EXPECT_EQ(second.to_floats()[0], 2.5f);
  EXPECT_THROW(ops::AutocastScope(DType::i32), Error);
}

}  // namespace
}  // namespace tfm
