// The optimizer ops (adam_step, global_norm, scale_in_place) against double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

std::vector<float> random_floats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

TEST(OpsOptimizer, AdamStepMatchesDoubleReference) {
  const int64_t n = 40000;  // above the kernel's threshold for threads
  const double b1 = 0.9, b2 = 0.98, eps = 1e-9, lr = 1e-3;
  std::vector<double> p(static_cast<size_t>(n)), m(p.size(), 0.0), v(p.size(), 0.0);
  const std::vector<float> p0 = random_floats(n, 1);
  std::copy(p0.begin(), p0.end(), p.begin());
  Tensor param = Tensor::from_floats({n}, p0);
  Tensor m_t = Tensor::zeros({n}), v_t = Tensor::zeros({n});
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = random_floats(n, 10 + static_cast<unsigned>(t));
    ops::AdamStepOptions step;
    step.step_size = static_cast<float>(lr / (1.0 - std::pow(b1, t)));
    step.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(b2, t)));
    ops::adam_step(param, Tensor::from_floats({n}, g), m_t, v_t, step);
    for (size_t j = 0; j < p.size(); ++j) {
      m[j] = b1 * m[j] + (1 - b1) * g[j];
      v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j];
      p[j] -= lr / (1 - std::pow(b1, t)) * m[j] / (std::sqrt(v[j] / (1 - std::pow(b2, t))) + eps);
    }
  }
  const std::vector<float> got = param.to_floats(), got_m = m_t.to_floats();
  for (size_t j = 0; j < p.size(); j += 97) {
    EXPECT_NEAR(got[j], p[j], 1e-6) << j;
    EXPECT_NEAR(got_m[j], m[j], 1e-6) << j;
  }
}

TEST(OpsOptimizer, AdamStepRefusesMismatchedState) {
  Tensor p = Tensor::zeros({4});
  EXPECT_THROW(ops::adam_step(p, Tensor::zeros({4}), Tensor::zeros({3}), Tensor::zeros({4}), {}),
               Error);
}

TEST(OpsOptimizer, GlobalNormAndScale) {
  const std::vector<float> a = random_floats(70000, 2), b = random_floats(13, 3);
  double sum = 0;
  for (float x : a) sum += static_cast<double>(x) * x;
  for (float x : b) sum += static_cast<double>(x) * x;
  std::vector<Tensor> grads{Tensor::from_floats({70000}, a), Tensor(),
                            Tensor::from_floats({13}, b)};
  EXPECT_NEAR(ops::global_norm(grads), std::sqrt(sum), 1e-9 * std::sqrt(sum));
  EXPECT_EQ(ops::global_norm({}), 0.0);
  ops::scale_in_place(grads, 0.25f);
  const std::vector<float> scaled = grads[2].to_floats();
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(scaled[i], b[i] * 0.25f);
  EXPECT_NEAR(ops::global_norm(grads), 0.25 * std::sqrt(sum), 1e-9 * std::sqrt(sum));
}

TEST(OpsOptimizer, MovingAverageMovesTheAverageTowardsTheValues) {
  const std::vector<float> a = random_floats(5000, 5), x = random_floats(5000, 6);
  Tensor average = Tensor::from_floats({50, 100}, a);
  ops::moving_average(average, Tensor::from_floats({50, 100}, x), 0.75f);
  const std::vector<float> out = average.to_floats();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(out[i], 0.75 * a[i] + 0.25 * x[i], 1e-6) << i;
  // Decay 0 takes the values (to a rounding); an average equal to the values stays exactly them.
  ops::moving_average(average, Tensor::from_floats({50, 100}, x), 0.0f);
  const std::vector<float> taken = average.to_floats();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(taken[i], x[i], 1e-6) << i;
  Tensor settled = Tensor::from_floats({50, 100}, x);
  ops::moving_average(settled, Tensor::from_floats({50, 100}, x), 0.999f);
  EXPECT_EQ(settled.to_floats(), x);
  // Mismatched shapes and a decay outside [0, 1) are errors.
  EXPECT_THROW(ops::moving_average(average, Tensor::from_floats({5000}, x), 0.5f), Error);
  EXPECT_THROW(ops::moving_average(average, Tensor::from_floats({50, 100}, x), 1.0f), Error);
}

TEST(OpsOptimizer, FillOverwritesEvenNaN) {
  std::vector<float> values = random_floats(1000, 4);
  values[17] = std::numeric_limits<float>::quiet_NaN();
  values[400] = -std::numeric_limits<float>::infinity();
  std::vector<Tensor> tensors{Tensor::from_floats({1000}, values), Tensor(),
                              Tensor::from_floats({3}, {1, 2, 3})};
  ops::fill_in_place(tensors, 0.0f);
  for (float x : tensors[0].to_floats()) EXPECT_EQ(x, 0.0f);
  ops::fill_in_place({tensors[2]}, -1.5f);
  EXPECT_EQ(tensors[2].to_floats(), std::vector<float>({-1.5f, -1.5f, -1.5f}));
}

}  // namespace
}  // namespace tfm::internal
