// Mixed precision: the bf16 conversion kernel against the scalar rounding, and ops::linear with
// bf16 products (ops::ProductOptions) against a double-precision product of the bf16-rounded
// operands (forward and both gradients); the product type is a value, with no state between calls
// or threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "cuda_test_util.h"
#include "gradcheck.h"
#include "temp_dir.h"
#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
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

// `auto` is decided by the device that multiplies: the CPU's rule for the CPU, bf16 on a GPU with
// bf16 tensor cores (every GPU the CUDA backend is built for: sm_80 and later).
TEST(Autocast, AutoPrecisionIsTheTrainingDevicesChoice) {
  const DType cpu = ops::native_bf16_products() ? DType::bf16 : DType::f32;
  EXPECT_EQ(ops::parse_precision("auto", "training.precision"), cpu);
  EXPECT_EQ(ops::parse_precision("auto", "training.precision", Device::cpu), cpu);
  EXPECT_EQ(ops::parse_precision("f32", "training.precision", Device::cuda), DType::f32);
}

TEST(CudaAutocast, AutoPrecisionIsBf16OnAGpuWithTensorCores) {
  TFM_REQUIRE_CUDA();
  EXPECT_EQ(ops::parse_precision("auto", "training.precision", Device::cuda), DType::bf16);
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
    Tensor y = ops::linear(xt, wt, bt, {DType::bf16});
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

// The product type is an argument, not state: a weight changed between two calls is converted
// again (no stale copy), f32 and bf16 calls interleave freely, and other types are refused.
TEST(Autocast, TheProductTypeIsAnArgumentAndNothingIsCached) {
  std::mt19937 rng(9);
  const int64_t rows = 5, in = 16, out = 8;
  Values x = random_values(rows * in, rng), w = random_values(out * in, rng);
  Tensor xt = tensor_of({rows, in}, x), wt = tensor_of({out, in}, w);
  const Values none(static_cast<size_t>(out), 0.0);
  const Values want_bf16 = linear_double(rounded(x), rounded(w), none, rows, in, out);
  const Values want_f32 = linear_double(x, w, none, rows, in, out);
  EXPECT_LT(relative_error(ops::linear(xt, wt, {}, {DType::bf16}).to_floats(), want_bf16), 1e-5);
  EXPECT_LT(relative_error(ops::linear(xt, wt).to_floats(), want_f32), 1e-6);
  EXPECT_LT(relative_error(ops::linear(xt, wt, {}, {DType::bf16}).to_floats(), want_bf16), 1e-5);
  // A weight changed between calls (an optimizer update) is converted again.
  wt.fill(2.5f);
  const Values changed(static_cast<size_t>(out * in), 2.5);
  EXPECT_LT(relative_error(ops::linear(xt, wt, {}, {DType::bf16}).to_floats(),
                           linear_double(rounded(x), changed, none, rows, in, out)),
            1e-5);
  testing::expect_error([&] { ops::linear(xt, wt, {}, {DType::i32}); },
                        {"linear", "products in i32 are not supported"});
}

// Two threads multiplying with one weight at once, one in bf16 and one in f32, each get exactly
// what they get alone: there is no per-thread (or global) precision state to leak between them.
TEST(Autocast, ThreadsWithDifferentProductTypesGetTheResultsOfOne) {
  std::mt19937 rng(10);
  const int64_t rows = 33, in = 48, out = 40;
  Tensor xt = tensor_of({rows, in}, random_values(rows * in, rng));
  Tensor wt = tensor_of({out, in}, random_values(out * in, rng));
  const DType types[2] = {DType::bf16, DType::f32};
  std::vector<float> alone[2];
  for (int t = 0; t < 2; ++t) alone[t] = ops::linear(xt, wt, {}, {types[t]}).to_floats();
  int differing[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat)
        differing[t] += ops::linear(xt, wt, {}, {types[t]}).to_floats() != alone[t];
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(differing[0], 0);
  EXPECT_EQ(differing[1], 0);
  EXPECT_NE(alone[0], alone[1]);  // the two types really differ
}

}  // namespace
}  // namespace tfm::internal
