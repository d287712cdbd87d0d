#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/core/threading.h"
#include "tfm/kernels/cpu/dropout_cpu.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_f32_values;
using testing::Values;

// Values in [0.5, 1.5): never 0, so a zero in the output marks a dropped element.
Tensor positive_tensor(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  return Tensor::from_floats(
      shape, testing::to_float_vector(random_f32_values(shape.numel(), rng, 0.5, 1.5)));
}

TEST(OpsDropout, ForwardAndGradientsWithTheSeedsMask) {
  std::mt19937 rng(51);
  const float p = 0.3f;
  const uint64_t seed = 42;
  for (const Shape& shape : {Shape{5, 7}, Shape{2, 3, 11}}) {
    SCOPED_TRACE(shape.str());
    testing::check_op(
        {{shape, random_f32_values(shape.numel(), rng)}},
        [&](const std::vector<Tensor>& t) { return ops::dropout(t[0], p, seed); },
        [&](const std::vector<Values>& v) {
          Values y(v[0].size());
          const double scale = 1.0f / (1.0f - p);  // the kernel's f32 scale, exactly
          for (size_t i = 0; i < y.size(); ++i)
            y[i] = cpu::dropout_keep(seed, i, p) ? v[0][i] * scale : 0.0;
          return y;
        });
  }
}

TEST(OpsDropout, SameSeedSameMaskOtherSeedOtherMask) {
  Tensor x = positive_tensor({64, 64}, 1);
  std::vector<float> a = ops::dropout(x, 0.5f, 7).to_floats();
  std::vector<float> b = ops::dropout(x, 0.5f, 7).to_floats();
  std::vector<float> c = ops::dropout(x, 0.5f, 8).to_floats();
  EXPECT_EQ(a, b);
  // Masks of nearby seeds must be unrelated: two independent p = 0.5 masks agree on half the
  // elements (4096 elements: standard deviation 32).
  int64_t agree = 0;
  for (size_t i = 0; i < a.size(); ++i) agree += (a[i] == 0) == (c[i] == 0);
  EXPECT_NEAR(static_cast<double>(agree), 2048.0, 5 * 32.0);
}

TEST(OpsDropout, KeptFractionAndScaleOnALargeTensor) {
  const int64_t n = int64_t{1} << 20;
  Tensor x = positive_tensor({n}, 2);
  std::vector<float> xs = x.to_floats();
  for (float p : {0.1f, 0.5f, 0.9f}) {
    SCOPED_TRACE(p);
    std::vector<float> y = ops::dropout(x, p, 1234).to_floats();
    const float scale = 1.0f / (1.0f - p);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (y[i] == 0) continue;
      ++kept;
      ASSERT_EQ(y[i], xs[i] * scale) << i;
    }
    // Binomial(n, 1 - p): within 5 standard deviations.
    double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
    EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 5 * sigma);
  }
}

TEST(OpsDropout, BackwardUsesTheForwardsMask) {
  const int64_t n = 50000;  // above the parallel threshold
  Tensor x = positive_tensor({n}, 3);
  x.set_requires_grad(true);
  std::mt19937 rng(4);
  Values seed = random_f32_values(n, rng);
  const float p = 0.25f;
  Tensor y = testing::forward_backward([&] { return ops::dropout(x, p, 99); }, seed);
  std::vector<float> ys = y.to_floats(), dx = x.grad().to_floats();
  const float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dx[i], ys[i] != 0 ? static_cast<float>(seed[i]) * scale : 0.0f) << i;
}

TEST(OpsDropout, MaskDoesNotDependOnTheThreadCount) {
  Tensor x = positive_tensor({300, 257}, 5);
  const int threads = num_threads();
  set_num_threads(1);
  std::vector<float> one = ops::dropout(x, 0.2f, 5).to_floats();
  set_num_threads(std::max(threads, 2));
  std::vector<float> many = ops::dropout(x, 0.2f, 5).to_floats();
  set_num_threads(threads);
  EXPECT_EQ(one, many);
}

TEST(OpsDropout, ZeroProbabilityIsTheIdentity) {
  Tensor x = positive_tensor({3, 4}, 6);
  x.set_requires_grad(true);
  Tape tape;
  TapeScope scope(tape);
  Tensor y = ops::dropout(x, 0.0f, 1);
  EXPECT_TRUE(y.same_storage(x));
  EXPECT_EQ(y.to_floats(), x.to_floats());
  EXPECT_EQ(tape.size(), 0u);
}

TEST(OpsDropout, BadArgumentsThrow) {
  Tensor x = Tensor::zeros({4});
  EXPECT_THROW(ops::dropout(x, 1.0f, 1), Error);
  EXPECT_THROW(ops::dropout(x, -0.1f, 1), Error);
  EXPECT_THROW(ops::dropout(x, std::nanf(""), 1), Error);
  EXPECT_THROW(ops::dropout(Tensor::zeros({4}, DType::i32), 0.1f, 1), Error);
}

}  // namespace
}  // namespace tfm::internal
