// cpu::gemm_stats(): the always-on accounting of matrix products that bench_train_step uses to
// report the share of a training step spent outside them.
#include <gtest/gtest.h>
#include <omp.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tfm/autograd/tape.h"
#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using cpu::GemmArgs;
using cpu::GemmOperand;

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (float& v : values) v = dist(rng);
  return Tensor::from_floats(shape, values);
}

// ops::linear forward and backward on copies of x [7, 9] and w [3, 9] that require gradients: three
// products, y = x W^T, dx = g W and dW = g^T x.
void linear_step(const Tensor& x, const Tensor& w, std::mt19937& rng) {
  Tensor xl = x.clone(), wl = w.clone();
  xl.set_requires_grad(true);
  wl.set_requires_grad(true);
  Tape tape;
  Tensor y;
  {
    TapeScope scope(tape);
    y = ops::linear(xl, wl);
  }
  tape.backward(y, random_tensor({x.dim(0), w.dim(0)}, rng));
}

TEST(GemmStats, CountsCallsFlopsAndTimeOfKnownProducts) {
  cpu::reset_gemm_stats();
  cpu::GemmStats zero = cpu::gemm_stats();
  EXPECT_EQ(zero.calls, 0);
  EXPECT_EQ(zero.seconds, 0.0);
  EXPECT_EQ(zero.flops, 0.0);

  // A [2, 3] batch of [4, 5] @ [5, 6] products, b broadcast over the second batch dim: the flops
  // are those of c's 6 matrices, 2 * 4 * 6 * 5 each.
  std::mt19937 rng(3);
  Tensor a = random_tensor({2, 3, 4, 5}, rng), b = random_tensor({2, 1, 5, 6}, rng);
  Tensor c = Tensor::empty({2, 3, 4, 6});
  GemmArgs args;
  args.a = GemmOperand::dense(a.raw(), DType::f32, {2, 3, 4, 5});
  args.b = GemmOperand::dense(b.raw(), DType::f32, {2, 1, 5, 6});
  args.c = GemmOperand::dense(c.raw(), DType::f32, {2, 3, 4, 6});
  cpu::gemm(args);
  // The product did run: c[1, 2, 3, 4] = a[1, 2, 3, :] . b[1, 0, :, 4].
  double expected = 0;
  for (int k = 0; k < 5; ++k)
    expected += static_cast<double>(a.data<float>()[((1 * 3 + 2) * 4 + 3) * 5 + k]) *
                b.data<float>()[(1 * 5 + k) * 6 + 4];
  EXPECT_NEAR(c.data<float>()[((1 * 3 + 2) * 4 + 3) * 6 + 4], expected, 1e-5);

  cpu::GemmStats one = cpu::gemm_stats();
  EXPECT_EQ(one.calls, 1);
  EXPECT_EQ(one.flops, 2.0 * 6 * 4 * 6 * 5);
  EXPECT_GT(one.seconds, 0.0);

  // ops::linear forward and backward: y = x W^T, dx = g W, dW = g^T x, each 2 * 7 * 3 * 9 flops.
  linear_step(random_tensor({7, 9}, rng), random_tensor({3, 9}, rng), rng);
  cpu::GemmStats four = cpu::gemm_stats();
  EXPECT_EQ(four.calls, 4);
  EXPECT_EQ(four.flops, one.flops + 3 * 2.0 * 7 * 3 * 9);
  EXPECT_GE(four.seconds, one.seconds);

  cpu::reset_gemm_stats();
  cpu::GemmStats reset = cpu::gemm_stats();
  EXPECT_EQ(reset.calls, 0);
  EXPECT_EQ(reset.seconds, 0.0);
  EXPECT_EQ(reset.flops, 0.0);
}

TEST(GemmStats, AnEmptyInnerDimensionIsACallWithoutFlops) {
  cpu::reset_gemm_stats();
  Tensor a = Tensor::empty({3, 0}), b = Tensor::empty({0, 2});
  Tensor c = Tensor::full({3, 2}, 5.0f);
  GemmArgs args;
  args.a = GemmOperand::dense(a.raw(), DType::f32, {3, 0});
  args.b = GemmOperand::dense(b.raw(), DType::f32, {0, 2});
  args.c = GemmOperand::dense(c.raw(), DType::f32, {3, 2});
  cpu::gemm(args);
  EXPECT_EQ(c.data<float>()[0], 0.0f);  // c = the empty sum
  cpu::GemmStats stats = cpu::gemm_stats();
  EXPECT_EQ(stats.calls, 1);
  EXPECT_EQ(stats.flops, 0.0);
}

// The packed inference products (an InferenceModel's packed weights) report through record_gemm;
// inside a parallel region each thread counts its share of the wall time.
TEST(GemmStats, RecordedProductsCountTheirShareOfAParallelRegion) {
  cpu::reset_gemm_stats();
  cpu::record_gemm(0.5, 1000.0);
  int threads = 1;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    threads = omp_get_num_threads();
    cpu::record_gemm(0.25, 10.0);
  }
  cpu::GemmStats stats = cpu::gemm_stats();
  EXPECT_EQ(stats.calls, 1 + threads);
  EXPECT_DOUBLE_EQ(stats.flops, 1000.0 + 10.0 * threads);
  EXPECT_NEAR(stats.seconds, 0.5 + 0.25, 1e-6);  // threads x (0.25 / threads)
}

// The per-kind accounting: off by default; on, each kind of product by name, with its calls and
// flops; switching it off forgets them.
TEST(GemmStats, ShapeStatsNameEachKindOfProduct) {
  cpu::set_gemm_shape_stats(false);
  std::mt19937 rng(5);
  const Tensor x = random_tensor({7, 9}, rng), w = random_tensor({3, 9}, rng);
  linear_step(x, w, rng);
  EXPECT_TRUE(cpu::gemm_shape_stats().empty());

  cpu::set_gemm_shape_stats(true);
  linear_step(x, w, rng);
  linear_step(x, w, rng);
  Tensor a = random_tensor({2, 3, 4, 5}, rng), b = random_tensor({2, 3, 5, 6}, rng);
  Tensor c = Tensor::full({2, 3, 4, 6}, 1.0f);
  GemmArgs args;
  args.a = GemmOperand::dense(a.raw(), DType::f32, {2, 3, 4, 5});
  args.b = GemmOperand::dense(b.raw(), DType::f32, {2, 3, 5, 6});
  args.c = GemmOperand::dense(c.raw(), DType::f32, {2, 3, 4, 6});
  args.accumulate = true;
  cpu::gemm(args);

  std::map<std::string, cpu::GemmShapeStats> kinds;
  for (const cpu::GemmShapeStats& kind : cpu::gemm_shape_stats()) kinds[kind.shape] = kind;
  ASSERT_EQ(kinds.size(), 4u);
  // y = x W^T, dx = g W, dW = g^T x (M x N x K), twice each; then the batch of 6 added to c.
  const std::pair<const char*, double> expected[] = {{"f32 7x3x9 N T", 2.0 * 7 * 3 * 9},
                                                     {"f32 7x9x3 N N", 2.0 * 7 * 9 * 3},
                                                     {"f32 3x9x7 T N", 2.0 * 3 * 9 * 7}};
  for (const auto& [shape, flops] : expected) {
    ASSERT_TRUE(kinds.count(shape)) << shape;
    EXPECT_EQ(kinds[shape].calls, 2) << shape;
    EXPECT_EQ(kinds[shape].flops, 2 * flops) << shape;
    EXPECT_GT(kinds[shape].seconds, 0.0) << shape;
  }
  ASSERT_TRUE(kinds.count("f32 4x6x5 x6 N N +="));
  EXPECT_EQ(kinds["f32 4x6x5 x6 N N +="].calls, 1);
  EXPECT_EQ(kinds["f32 4x6x5 x6 N N +="].flops, 6 * 2.0 * 4 * 6 * 5);
  const std::vector<cpu::GemmShapeStats> sorted = cpu::gemm_shape_stats();
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_GE(sorted[i - 1].seconds, sorted[i].seconds);

  cpu::set_gemm_shape_stats(false);
  EXPECT_TRUE(cpu::gemm_shape_stats().empty());
  linear_step(x, w, rng);
  EXPECT_TRUE(cpu::gemm_shape_stats().empty());
}

// The packed inference products are counted by kind too, with the kernel that took them: few rows
// in the panel kernel where the weight has panels, many rows in oneDNN.
TEST(GemmStats, ShapeStatsNameThePackedProductsAndTheirKernel) {
  std::mt19937 rng(6);
  const Tensor w = random_tensor({80, 48}, rng), bias = random_tensor({80}, rng);
  const cpu::PackedWeight packed(w.data<float>(), 80, 48, DType::f32);
  const Tensor few = random_tensor({5, 48}, rng), many = random_tensor({300, 48}, rng);
  Tensor y_few = Tensor::empty({5, 80}), y_many = Tensor::empty({300, 80});
  cpu::set_gemm_shape_stats(true);
  cpu::packed_linear(few.data<float>(), 5, packed, bias.data<float>(), y_few.data<float>());
  cpu::packed_linear(few.data<float>(), 5, packed, bias.data<float>(), y_few.data<float>());
  cpu::packed_linear(many.data<float>(), 300, packed, bias.data<float>(), y_many.data<float>());
  std::map<std::string, cpu::GemmShapeStats> kinds;
  for (const cpu::GemmShapeStats& kind : cpu::gemm_shape_stats()) kinds[kind.shape] = kind;
  cpu::set_gemm_shape_stats(false);

  ASSERT_EQ(kinds.size(), 2u);
  const std::string few_kind =
      std::string("packed f32 5x80x48 ") + (packed.panels() ? "panel" : "onednn");
  ASSERT_TRUE(kinds.count(few_kind)) << few_kind;
  EXPECT_EQ(kinds[few_kind].calls, 2);
  EXPECT_EQ(kinds[few_kind].flops, 2 * 2.0 * 5 * 80 * 48);
  ASSERT_TRUE(kinds.count("packed f32 300x80x48 onednn"));
  EXPECT_EQ(kinds["packed f32 300x80x48 onednn"].calls, 1);
  EXPECT_EQ(kinds["packed f32 300x80x48 onednn"].flops, 2.0 * 300 * 80 * 48);
  EXPECT_GT(kinds["packed f32 300x80x48 onednn"].seconds, 0.0);
}

}  // namespace
}  // namespace tfm::internal
