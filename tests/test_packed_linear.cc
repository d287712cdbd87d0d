// ops::linear's inference path: a product without a gradient multiplies with the weight packed
// once (ops::pack_weight, ops::ProductOptions::packed). Checked against double-precision products
// of the (rounded, for bf16) operands, for row counts from 1 to a few hundred, with and without a
// bias; and the packed copy's contract (a snapshot, checked against its weight, skipped when a
// gradient is recorded).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gradcheck.h"
#include "temp_dir.h"
#include "tfm/autograd/tape.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal {
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
    const auto packed = ops::pack_weight(wt, dtype);
    const ops::ProductOptions product{dtype, packed.get()};
    for (int64_t rows : {1, 4, 33, 128, 301}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", rows " + std::to_string(rows));
      Values x = random_values(rows * in, rng);
      Tensor xt = tensor_of({rows, in}, x);
      EXPECT_LT(relative_error(ops::linear(xt, wt, bt, product).to_floats(), x, w, b, rows, in, out,
                               dtype),
                1e-5);
      EXPECT_LT(relative_error(ops::linear(xt, wt, {}, product).to_floats(), x, w, {}, rows, in,
                               out, dtype),
                1e-5);
      if (dtype == DType::bf16) {
        // The bf16 operands really were used: the unrounded product is measurably different.
        EXPECT_GT(relative_error(ops::linear(xt, wt, bt, product).to_floats(), x, w, b, rows, in,
                                 out, DType::f32),
                  1e-4);
      }
    }
  }
}

TEST(PackedLinear, APackedCopyIsASnapshotUsedOnlyWithoutAGradient) {
  std::mt19937 rng(62);
  Tensor w = tensor_of({40, 24}, random_values(40 * 24, rng));
  Tensor x = tensor_of({3, 24}, random_values(72, rng));
  const auto packed = ops::pack_weight(w, DType::bf16);
  EXPECT_EQ(packed->dtype(), DType::bf16);
  EXPECT_EQ(packed->out_features(), 40);
  EXPECT_EQ(packed->in_features(), 24);
  // A block of rows is a weight of its own.
  EXPECT_EQ(ops::pack_weight(w.slice_rows(0, 16), DType::f32)->out_features(), 16);
  const std::vector<float> before = ops::linear(x, w, {}, {DType::bf16, packed.get()}).to_floats();
  // The packed copy owns its memory: changing the weight afterwards changes the plain product only.
  Tensor original = w.clone();
  w.fill(1.0f);
  EXPECT_EQ(ops::linear(x, w, {}, {DType::bf16, packed.get()}).to_floats(), before);
  EXPECT_NE(ops::linear(x, w, {}, {DType::bf16}).to_floats(), before);
  w.copy_from(original);
  // A packed weight must be this weight in this product type.
  testing::expect_error(
      [&] {
        ops::linear(x, w, {}, {DType::f32, packed.get()});
      },
      {"linear", "packed weight bf16[40, 24]", "for f32 products"});
  const auto rows = ops::pack_weight(w.slice_rows(0, 16), DType::bf16);
  testing::expect_error(
      [&] {
        ops::linear(x, w, {}, {DType::bf16, rows.get()});
      },
      {"linear", "packed weight bf16[16, 24]"});
  testing::expect_error([&] { ops::pack_weight(w, DType::i32); },
                        {"pack_weight", "products in i32 are not supported"});
  // While a tape records, linear keeps its plain path: the gradient still flows.
  x.set_requires_grad(true);
  Tape tape;
  {
    TapeScope recording(tape);
    Tensor y = ops::linear(x, w, {}, {DType::f32, ops::pack_weight(w, DType::f32).get()});
    tape.backward(y, Tensor::full({3, 40}, 1.0f));
  }
  ASSERT_TRUE(x.grad().defined());
}

}  // namespace
}  // namespace tfm::internal
