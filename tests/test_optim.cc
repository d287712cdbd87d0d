#include <gtest/gtest.h>

#include <cmath>

#include "tfm/autograd/tape.h"
#include "tfm/train/adam.h"
#include "tfm/train/schedule.h"

namespace tfm::internal {
namespace {

TEST(NoamSchedule, FollowsEquationThree) {
  NoamSchedule s{512, 4000, 1.0};
  for (int64_t step : {1, 10, 1000, 3999, 4000, 4001, 20000, 100000}) {
    double expected =
        std::pow(512.0, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(4000.0, -1.5));
    EXPECT_DOUBLE_EQ(s.learning_rate(step), expected) << step;
  }
  // Linear warm-up, peak at step = warmup, then inverse square root decay.
  EXPECT_NEAR(s.learning_rate(2000) / s.learning_rate(1000), 2.0, 1e-12);
  EXPECT_NEAR(s.learning_rate(16000) / s.learning_rate(4000), 0.5, 1e-12);
  EXPECT_GT(s.learning_rate(4000), s.learning_rate(3999));
  EXPECT_GT(s.learning_rate(4000), s.learning_rate(4001));
  NoamSchedule scaled{512, 4000, 2.0};
  EXPECT_DOUBLE_EQ(scaled.learning_rate(123), 2.0 * s.learning_rate(123));
  EXPECT_THROW(s.learning_rate(0), Error);
}

TEST(NoamSchedule, AShorterWarmupReachesTheSamePeakSooner) {
  NoamSchedule recipe{256, 1000, 1.5};
  NoamSchedule fitted = recipe.with_warmup_at_same_peak(160);
  EXPECT_EQ(fitted.warmup, 160);
  EXPECT_NEAR(fitted.peak(), recipe.peak(), 1e-15);
  EXPECT_NEAR(recipe.peak(), 1.5 / std::sqrt(256.0 * 1000.0), 1e-15);
  // Linear to the peak at step 160, then peak * sqrt(160 / step).
  EXPECT_NEAR(fitted.learning_rate(40), recipe.peak() * 40 / 160, 1e-15);
  EXPECT_NEAR(fitted.learning_rate(640), recipe.peak() * 0.5, 1e-15);
  EXPECT_GT(fitted.learning_rate(160), fitted.learning_rate(159));
  EXPECT_GT(fitted.learning_rate(160), fitted.learning_rate(161));
  EXPECT_THROW(recipe.with_warmup_at_same_peak(0), Error);
}

TEST(Adam, MatchesTheUpdateFormulaOverSeveralSteps) {
  Tensor p = Tensor::from_floats({3}, {0.5f, -1.0f, 2.0f});
  p.set_requires_grad(true);
  Adam adam({p});
  double ref_p[3] = {0.5, -1.0, 2.0}, m[3] = {0, 0, 0}, v[3] = {0, 0, 0};
  const double grads[3][3] = {{0.1, -0.2, 0.3}, {0.05, 0.4, -0.1}, {-0.3, 0.0, 0.2}};
  for (int t = 1; t <= 3; ++t) {
    GradTarget g = grad_target(p);
    for (int i = 0; i < 3; ++i) g.tensor.data<float>()[i] = static_cast<float>(grads[t - 1][i]);
    double lr = 0.01 * t;
    adam.step(lr);
    adam.zero_grad();
    for (int i = 0; i < 3; ++i) {
      double gi = grads[t - 1][i];
      m[i] = 0.9 * m[i] + 0.1 * gi;
      v[i] = 0.98 * v[i] + 0.02 * gi * gi;
      double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.98, t));
      ref_p[i] -= lr * mhat / (std::sqrt(vhat) + 1e-9);
    }
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(p.to_floats()[i], ref_p[i], 1e-6) << t << "," << i;
  }
  EXPECT_EQ(adam.steps(), 3);
}

}  // namespace
}  // namespace tfm::internal
