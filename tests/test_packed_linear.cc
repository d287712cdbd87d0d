// ops::linear's inference path: inside an AutocastScope a product without a gradient uses the
// weight packed once for the scope (cpu::PackedWeight). Checked against double-precision products
// of the (rounded, for bf16) operands, for row counts from 1 to a few hundred, with and without a
// bias, and for the lifetime of the packed copies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gradcheck.h"
#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

using testing::random_values;
using testing::Values;

Tensor tensor_of(const Shape& shape, const Values& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_floats(shape, f);
}

double maybe_rounded(double v, DType dtype) {
  return dtype == DType::bf16 ? bf16_to_float(float_to_bf16(static_cast<float>(v))) : v;
}

// max |y - x W^T - b| / max |x W^T + b| with the operands rounded as the product type does.
double relative_error(const std::vector<float>& y, const Values& x, const Values& w,
                      const Values& b, int64_t rows, int64_t in, int64_t out, DType dtype) {
  double diff = 0, scale = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i)
        s += maybe_rounded(x[static_cast<size_t>(r * in + i)], dtype) *
             maybe_rounded(w[static_cast<size_t>(o * in + i)], dtype);
      diff = std::max(diff, std::abs(y[static_cast<size_t>(r * out + o)] - s));
      scale = std::max(scale, std::abs(s));
    }
  return diff / scale;
}

// Shapes that are not multiples of oneDNN's 16 x 64 weight tiles (padding inside the packed copy).
TEST(PackedLinear, EqualsTheProductOfTheRoundedOperands) {
  const int64_t in = 70, out = 93;
  std::mt19937 rng(61);
  Values w = random_values(out * in, rng), b = random_values(out, rng);
  Tensor wt = tensor_of({out, in}, w), bt = tensor_of({out}, b);
  for (DType dtype : {DType::f32, DType::bf16}) {
    ops::AutocastScope scope(dtype);
    for (int64_t rows : {1, 4, 33, 128, 301}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", rows " + std::to_string(rows));
      Values x = random_values(rows * in, rng);
      Tensor xt = tensor_of({rows, in}, x);
      EXPECT_LT(relative_error(ops::linear(xt, wt, bt).to_floats(), x, w, b, rows, in, out, dtype),
                1e-5);
      EXPECT_LT(relative_error(ops::linear(xt, wt).to_floats(), x, w, {}, rows, in, out, dtype),
                1e-5);
      if (dtype == DType::bf16) {
        // The bf16 operands really were used: the unrounded product is measurably different.
        EXPECT_GT(
            relative_error(ops::linear(xt, wt, bt).to_floats(), x, w, b, rows, in, out, DType::f32),
            1e-4);
      }
    }
  }
}

TEST(PackedLinear, PackedOncePerScopeAndOnlyWithoutAGradient) {
  std::mt19937 rng(62);
  Tensor w = tensor_of({40, 24}, random_values(40 * 24, rng));
  EXPECT_EQ(ops::packed_weight(w), nullptr);  // outside any scope
  {
    ops::AutocastScope scope(DType::bf16);
    const cpu::PackedWeight* first = ops::packed_weight(w);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->dtype(), DType::bf16);
    EXPECT_EQ(ops::packed_weight(w), first);
    // A block of rows starting at the same element is another weight.
    const cpu::PackedWeight* rows = ops::packed_weight(w.slice_rows(0, 16));
    EXPECT_NE(rows, first);
    EXPECT_EQ(rows->out_features(), 16);
    {
      ops::AutocastScope inner(DType::f32);
      EXPECT_EQ(ops::packed_weight(w)->dtype(), DType::f32);
    }
    EXPECT_EQ(ops::packed_weight(w), first);
  }
  // While a tape records, linear keeps its plain path: the gradient still flows.
  Tensor x = tensor_of({3, 24}, random_values(72, rng));
  x.set_requires_grad(true);
  Tape tape;
  {
    TapeScope recording(tape);
    ops::AutocastScope scope(DType::f32);
    Tensor y = ops::linear(x, w);
    tape.backward(y, Tensor::full({3, 40}, 1.0f));
  }
  ASSERT_TRUE(x.grad().defined());
}

}  // namespace
}  // namespace tfm
