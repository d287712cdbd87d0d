// ops::matmul and ops::linear against double-precision references and finite differences, plus the
// strided oneDNN product underneath them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gradcheck.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::check_op;
using testing::Input;
using testing::random_values;
using testing::Values;

// op(a) @ op(b) in double: a is [batch, ra, ca], b is [batch or 1, rb, cb] (1: shared by every
// batch).
Values matmul_reference(const Values& a, const Values& b, int64_t batch, int64_t ra, int64_t ca,
                        int64_t rb, int64_t cb, bool trans_a, bool trans_b, bool shared_b) {
  int64_t m = trans_a ? ca : ra, k = trans_a ? ra : ca, n = trans_b ? rb : cb;
  Values c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t s = 0; s < batch; ++s) {
    const double* pa = a.data() + s * ra * ca;
    const double* pb = b.data() + (shared_b ? 0 : s * rb * cb);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = trans_a ? pa[p * ca + i] : pa[i * ca + p];
          double y = trans_b ? pb[j * cb + p] : pb[p * cb + j];
          sum += x * y;
        }
        c[static_cast<size_t>((s * m + i) * n + j)] = sum;
      }
  }
  return c;
}

// Checks matmul(a, b, trans_a, trans_b) for a of shape a_shape and b of shape b_shape.
void check_matmul(const Shape& a_shape, const Shape& b_shape, bool trans_a, bool trans_b,
                  unsigned seed) {
  SCOPED_TRACE("a " + a_shape.str() + (trans_a ? "^T" : "") + " @ b " + b_shape.str() +
               (trans_b ? "^T" : ""));
  std::mt19937 rng(seed);
  Input a{a_shape, random_values(a_shape.numel(), rng)};
  Input b{b_shape, random_values(b_shape.numel(), rng)};
  int64_t batch = a_shape.numel() / (a_shape[-2] * a_shape[-1]);
  bool shared_b = b_shape.rank() == 2 && a_shape.rank() > 2;
  check_op(
      {a, b},
      [&](const std::vector<Tensor>& t) { return ops::matmul(t[0], t[1], trans_a, trans_b); },
      [&](const std::vector<Values>& v) {
        return matmul_reference(v[0], v[1], batch, a_shape[-2], a_shape[-1], b_shape[-2],
                                b_shape[-1], trans_a, trans_b, shared_b);
      });
}

TEST(OpsMatmul, AllTransposeCombinationsOnOddSizes) {
  // op(a): [5, 7], op(b): [7, 3].
  check_matmul({5, 7}, {7, 3}, false, false, 1);
  check_matmul({7, 5}, {7, 3}, true, false, 2);
  check_matmul({5, 7}, {3, 7}, false, true, 3);
  check_matmul({7, 5}, {3, 7}, true, true, 4);
}

TEST(OpsMatmul, BatchedRank3AndRank4) {
  check_matmul({3, 4, 6}, {3, 6, 5}, false, false, 5);
  check_matmul({3, 6, 4}, {3, 5, 6}, true, true, 6);
  check_matmul({2, 3, 4, 5}, {2, 3, 5, 3}, false, false, 7);
  check_matmul({2, 3, 5, 4}, {2, 3, 5, 3}, true, false, 8);
  check_matmul({2, 3, 4, 5}, {2, 3, 3, 5}, false, true, 9);
}

TEST(OpsMatmul, Rank2BBroadcastOverTheBatch) {
  // A shared b takes one product over all rows (a row-major) or one per batch (a transposed).
  check_matmul({3, 4, 6}, {6, 5}, false, false, 10);
  check_matmul({3, 4, 6}, {5, 6}, false, true, 11);
  check_matmul({3, 6, 4}, {6, 5}, true, false, 12);
  check_matmul({2, 2, 6, 4}, {5, 6}, true, true, 13);
}

TEST(OpsMatmul, SameTensorOnBothSidesAccumulatesItsGradient) {
  // c = a a^T: dA = dC a + dC^T a, both halves written to one gradient buffer.
  std::mt19937 rng(14);
  Input a{{4, 3}, random_values(12, rng)};
  check_op(
      {a}, [](const std::vector<Tensor>& t) { return ops::matmul(t[0], t[0], false, true); },
      [](const std::vector<Values>& v) {
        return matmul_reference(v[0], v[0], 1, 4, 3, 4, 3, false, true, false);
      });
}

// x [rows, in] W^T + bias in double.
Values linear_reference(const Values& x, const Values& w, const Values* bias, int64_t rows,
                        int64_t in, int64_t out) {
  Values y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

TEST(OpsLinear, WithBiasOnBatchTimeInput) {
  std::mt19937 rng(20);
  Input x{{2, 3, 5}, random_values(30, rng)};
  Input w{{4, 5}, random_values(20, rng)};
  Input b{{4}, random_values(4, rng)};
  check_op(
      {x, w, b},
      [](const std::vector<Tensor>& t) {
        Tensor y = ops::linear(t[0], t[1], t[2]);
        EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
        return y;
      },
      [](const std::vector<Values>& v) { return linear_reference(v[0], v[1], &v[2], 6, 5, 4); });
}

TEST(OpsLinear, WithoutBias) {
  std::mt19937 rng(21);
  Input x{{3, 2, 7}, random_values(42, rng)};
  Input w{{3, 7}, random_values(21, rng)};
  check_op(
      {x, w}, [](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1]); },
      [](const std::vector<Values>& v) { return linear_reference(v[0], v[1], nullptr, 6, 7, 3); });
}

TEST(OpsLinear, WeightUsedTwiceGetsTheSumOfBothGradients) {
  // y = linear(linear(x, W, b), W, b): W and b receive gradients from both uses.
  std::mt19937 rng(22);
  Input x{{2, 3, 4}, random_values(24, rng)};
  Input w{{4, 4}, random_values(16, rng)};
  Input b{{4}, random_values(4, rng)};
  check_op(
      {x, w, b},
      [](const std::vector<Tensor>& t) {
        return ops::linear(ops::linear(t[0], t[1], t[2]), t[1], t[2]);
      },
      [](const std::vector<Values>& v) {
        Values h = linear_reference(v[0], v[1], &v[2], 6, 4, 4);
        return linear_reference(h, v[1], &v[2], 6, 4, 4);
      });
}

TEST(OpsMatmul, BadShapesThrow) {
  Tensor a = Tensor::zeros({2, 3, 4});
  EXPECT_THROW(ops::matmul(a, Tensor::zeros({2, 5, 2})), Error);     // inner 4 vs 5
  EXPECT_THROW(ops::matmul(a, Tensor::zeros({3, 4, 2})), Error);     // batch 2 vs 3
  EXPECT_THROW(ops::matmul(a, Tensor::zeros({4})), Error);           // rank 1
  EXPECT_THROW(ops::matmul(a, Tensor::zeros({4, 2}), true), Error);  // a^T is [2, 4, 3]
  EXPECT_THROW(ops::matmul(a, Tensor::zeros({4, 2}, DType::i32)), Error);
  EXPECT_THROW(ops::linear(a, Tensor::zeros({5, 3})), Error);
  EXPECT_THROW(ops::linear(a, Tensor::zeros({5, 4}), Tensor::zeros({4})), Error);
  try {
    ops::matmul(a, Tensor::zeros({2, 5, 2}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2, 3, 4]"), std::string::npos) << e.what();
  }
}

TEST(GemmCpu, AlphaScalesTheProductAndAccumulateAddsToC) {
  // c = alpha * a b + c_old on a strided view: every other column of a [3, 8] buffer is a [3, 4].
  std::mt19937 rng(30);
  Values a = random_values(24, rng), b = random_values(4 * 5, rng), c0 = random_values(15, rng);
  std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), fc(c0.begin(), c0.end());
  cpu::GemmArgs args;
  args.a = cpu::GemmOperand::strided(fa.data(), DType::f32, {3, 4}, {8, 2});
  args.b = cpu::GemmOperand::dense(fb.data(), DType::f32, {4, 5});
  args.c = cpu::GemmOperand::dense(fc.data(), DType::f32, {3, 5});
  args.alpha = 0.25f;
  args.accumulate = true;
  cpu::gemm(args);
  Values expected(15);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int p = 0; p < 4; ++p) s += a[i * 8 + 2 * p] * b[p * 5 + j];
      expected[i * 5 + j] = 0.25 * s + c0[i * 5 + j];
    }
  testing::expect_close(fc, expected, 1e-5, 1e-6, "alpha * a b + c");
}

TEST(GemmCpu, EmptyInnerDimensionGivesBiasOrKeepsC) {
  std::vector<float> a(1), b(1), c = {1, 2, 3, 4, 5, 6}, bias = {10, 20, 30};
  cpu::GemmArgs args;
  args.a = cpu::GemmOperand::dense(a.data(), DType::f32, {2, 0});
  args.b = cpu::GemmOperand::dense(b.data(), DType::f32, {0, 3});
  args.c = cpu::GemmOperand::dense(c.data(), DType::f32, {2, 3});
  args.bias = bias.data();
  args.accumulate = true;
  cpu::gemm(args);
  EXPECT_EQ(c, (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(GemmCpu, Bf16OperandsWithF32Result) {
  // The products of bf16 values are exact in f32; only the f32 accumulation rounds.
  std::mt19937 rng(31);
  Values a = random_values(6 * 9, rng), b = random_values(9 * 4, rng);
  std::vector<bf16> ha, hb;
  for (double& x : a) {
    ha.push_back(float_to_bf16(static_cast<float>(x)));
    x = bf16_to_float(ha.back());
  }
  for (double& x : b) {
    hb.push_back(float_to_bf16(static_cast<float>(x)));
    x = bf16_to_float(hb.back());
  }
  std::vector<float> c(6 * 4);
  cpu::GemmArgs args;
  args.a = cpu::GemmOperand::dense(ha.data(), DType::bf16, {6, 9});
  args.b = cpu::GemmOperand::dense(hb.data(), DType::bf16, {4, 9}).transposed();
  args.c = cpu::GemmOperand::dense(c.data(), DType::f32, {6, 4});
  cpu::gemm(args);
  testing::expect_close(c, matmul_reference(a, b, 1, 6, 9, 4, 9, false, true, false), 1e-5, 1e-6,
                        "bf16 a @ bf16 b^T");
}

// A product whose row count or inner dimension is a batch's token count is cut into a part of a
// multiple of 256 and a zero-padded tail (matmul_cpu.cc), so that oneDNN makes a few primitives
// rather than one per batch. Each case: every element of c within the f32 rounding bound of the
// exact result, and the columns of c's buffer beyond the product untouched.
struct CutCase {
  int64_t m, k, n;
  bool a_transposed;  // a seen through a [k, m] buffer, as a weight gradient's x^T
  DType dtype;
  bool bias, accumulate, relu;
  float alpha;
};

void check_cut_case(const CutCase& t, unsigned seed) {
  SCOPED_TRACE(std::to_string(t.m) + " x " + std::to_string(t.k) + " x " + std::to_string(t.n) +
               (t.a_transposed ? ", a transposed" : "") + ", " + std::string(dtype_name(t.dtype)));
  std::mt19937 rng(seed);
  const int64_t ldc = t.n + 3;
  Values a = random_values(t.m * t.k, rng), b = random_values(t.k * t.n, rng);
  Values bias = random_values(t.n, rng), c0 = random_values(t.m * ldc, rng);
  std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end());
  std::vector<bf16> ha, hb;
  for (size_t i = 0; i < a.size(); ++i) ha.push_back(float_to_bf16(fa[i]));
  for (size_t i = 0; i < b.size(); ++i) hb.push_back(float_to_bf16(fb[i]));
  if (t.dtype == DType::bf16) {  // the exact result of the values the product sees
    for (size_t i = 0; i < a.size(); ++i) a[i] = bf16_to_float(ha[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = bf16_to_float(hb[i]);
  }
  const void* a_data = t.dtype == DType::bf16 ? static_cast<const void*>(ha.data()) : fa.data();
  const void* b_data = t.dtype == DType::bf16 ? static_cast<const void*>(hb.data()) : fb.data();
  std::vector<float> fbias(bias.begin(), bias.end()), c(c0.begin(), c0.end());
  cpu::GemmArgs args;
  // a[i, p] is a[i * k + p], or a[p * m + i] when transposed.
  args.a = t.a_transposed ? cpu::GemmOperand::dense(a_data, t.dtype, {t.k, t.m}).transposed()
                          : cpu::GemmOperand::dense(a_data, t.dtype, {t.m, t.k});
  args.b = cpu::GemmOperand::dense(b_data, t.dtype, {t.k, t.n});
  args.c = cpu::GemmOperand::strided(c.data(), DType::f32, {t.m, t.n}, {ldc, 1});
  args.bias = t.bias ? fbias.data() : nullptr;
  args.accumulate = t.accumulate;
  args.relu = t.relu;
  args.alpha = t.alpha;
  cpu::gemm(args);

  const double u = std::ldexp(1.0, -24);
  double largest = 0;
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const double old = c0[static_cast<size_t>(i * ldc + j)];
      const float got = c[static_cast<size_t>(i * ldc + j)];
      if (j >= t.n) {
        ASSERT_EQ(got, static_cast<float>(old))
            << "c's buffer beyond the product at (" << i << ", " << j << ")";
        continue;
      }
      double sum = 0, magnitude = 0;
      for (int64_t p = 0; p < t.k; ++p) {
        const double x = t.a_transposed ? a[static_cast<size_t>(p * t.m + i)]
                                        : a[static_cast<size_t>(i * t.k + p)];
        const double y = b[static_cast<size_t>(p * t.n + j)];
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double b_j = t.bias ? bias[static_cast<size_t>(j)] : 0.0;
      double expected = t.alpha * (sum + b_j) + (t.accumulate ? old : 0.0);
      if (t.relu) expected = std::max(expected, 0.0);
      const double bound = static_cast<double>(t.k + 3) * u *
                           (std::fabs(t.alpha) * (magnitude + std::fabs(b_j)) + std::fabs(old));
      ASSERT_NEAR(got, expected, bound) << "element (" << i << ", " << j << ")";
      largest = std::max(largest, std::fabs(expected));
    }
  EXPECT_GT(largest, 1.0) << "the expected values are too small to test anything";
}

TEST(GemmCpu, ChangingRowsAndInnerDimensionsAreCutWithinTheRoundingBound) {
  const DType f32 = DType::f32, bf16 = DType::bf16;
  const CutCase cases[] = {
      // rows: 256 + a tail of 44 padded to 64; every option
      {300, 64, 40, false, f32, true, true, true, 0.5f},
      {300, 64, 40, false, bf16, true, false, false, 1.0f},
      // rows below 256: only the padded tail
      {45, 32, 24, false, f32, false, true, false, 1.0f},
      {45, 32, 24, false, bf16, true, false, true, 1.0f},
      // the inner dimension of a transposed a (a weight gradient's tokens): 256 + 44
      {48, 300, 40, true, f32, true, true, true, 0.25f},
      {48, 300, 40, true, bf16, true, false, false, 1.0f},
      // below 256, and both the inner dimension and the rows changing
      {64, 77, 40, true, f32, true, false, true, 1.0f},
      {290, 300, 24, true, bf16, false, true, false, 1.0f},
  };
  unsigned seed = 40;
  for (const CutCase& t : cases) check_cut_case(t, seed++);
}

TEST(GemmCpu, TwoHundredRowCountsMakeAFewPrimitives) {
  // Products of 257..456 rows, as a layer sees from batches of changing token counts: one head
  // of 256 rows and tails padded to 32..224 rows, 8 shapes, rather than 200.
  std::mt19937 rng(50);
  Values a = random_values(456 * 64, rng), b = random_values(64 * 40, rng);
  std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), c(456 * 40);
  const int64_t before = cpu::gemm_primitives_made();
  for (int64_t m = 257; m <= 456; ++m) {
    cpu::GemmArgs args;
    args.a = cpu::GemmOperand::dense(fa.data(), DType::f32, {m, 64});
    args.b = cpu::GemmOperand::dense(fb.data(), DType::f32, {64, 40});
    args.c = cpu::GemmOperand::dense(c.data(), DType::f32, {m, 40});
    cpu::gemm(args);
  }
  EXPECT_LE(cpu::gemm_primitives_made() - before, 8);
  double expected = 0;
  for (int p = 0; p < 64; ++p) expected += a[455 * 64 + p] * b[p * 40 + 39];
  EXPECT_NEAR(c[455 * 40 + 39], expected, 1e-4);
}

}  // namespace
}  // namespace tfm::internal
