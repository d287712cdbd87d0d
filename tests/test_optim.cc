#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tfm/autograd/tape.h"
#include "tfm/dist/communicator.h"
#include "tfm/train/adam.h"
#include "tfm/train/flat_parameters.h"
#include "tfm/train/gradient_buckets.h"
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

TEST(NoamSchedule, ALinearDecayFallsFromThePeakToZeroAtItsEnd) {
  const NoamSchedule noam{256, 100, 1.5};
  NoamSchedule linear{256, 100, 1.5, ScheduleShape::linear, 1100};
  // The warmup is equation 3's, to the same peak.
  for (int64_t step : {1, 2, 50, 99, 100})
    EXPECT_DOUBLE_EQ(linear.learning_rate(step), noam.learning_rate(step)) << step;
  const double peak = 1.5 / std::sqrt(256.0 * 100.0);
  EXPECT_DOUBLE_EQ(linear.peak(), peak);
  EXPECT_DOUBLE_EQ(linear.learning_rate(100), peak);
  EXPECT_NEAR(linear.learning_rate(350), 0.75 * peak, 1e-15);
  EXPECT_NEAR(linear.learning_rate(600), 0.5 * peak, 1e-15);  // half way
  EXPECT_NEAR(linear.learning_rate(1099), peak / 1000, 1e-15);
  EXPECT_EQ(linear.learning_rate(1100), 0.0);
  for (int64_t step : {1101, 5000, 1000000}) EXPECT_EQ(linear.learning_rate(step), 0.0) << step;
  for (int64_t step = 101; step <= 1200; ++step)
    EXPECT_LE(linear.learning_rate(step), linear.learning_rate(step - 1)) << step;
}

TEST(NoamSchedule, ACosineDecayFallsAsHalfACosineToZeroAtItsEnd) {
  const NoamSchedule noam{512, 40, 1.0};
  const NoamSchedule cosine{512, 40, 1.0, ScheduleShape::cosine, 440};
  for (int64_t step : {1, 20, 40})
    EXPECT_DOUBLE_EQ(cosine.learning_rate(step), noam.learning_rate(step));
  const double peak = noam.peak();
  // p = (step - 40) / 400: peak * (1 + cos(pi p)) / 2.
  EXPECT_NEAR(cosine.learning_rate(140), peak * (1 + std::cos(std::acos(-1.0) / 4)) / 2, 1e-15);
  EXPECT_NEAR(cosine.learning_rate(240), 0.5 * peak, 1e-15);  // half way
  EXPECT_NEAR(cosine.learning_rate(340), peak * (1 - std::cos(std::acos(-1.0) / 4)) / 2, 1e-15);
  EXPECT_EQ(cosine.learning_rate(440), 0.0);
  for (int64_t step = 41; step <= 1000; ++step) {
    EXPECT_GE(cosine.learning_rate(step), 0.0) << step;
    EXPECT_LE(cosine.learning_rate(step), cosine.learning_rate(step - 1)) << step;
  }
}

TEST(NoamSchedule, ADecayFollowsEquationThreeUntilItsEndIsKnownAndNoamIgnoresAnEnd) {
  const NoamSchedule noam{64, 10, 2.0};
  NoamSchedule unknown_end = noam;
  unknown_end.shape = ScheduleShape::linear;  // decay_end 0: a time budget not yet measured
  NoamSchedule noam_with_end = noam.with_decay_end(30);
  for (int64_t step : {1, 10, 11, 29, 30, 31, 1000}) {
    EXPECT_EQ(unknown_end.learning_rate(step), noam.learning_rate(step)) << step;
    EXPECT_EQ(noam_with_end.learning_rate(step), noam.learning_rate(step)) << step;
  }
  // Fitting keeps the shape and the end; an end within the warmup moves just past it.
  NoamSchedule linear = unknown_end.with_decay_end(500).with_warmup_at_same_peak(5);
  EXPECT_EQ(linear.shape, ScheduleShape::linear);
  EXPECT_EQ(linear.decay_end, 500);
  EXPECT_NEAR(linear.learning_rate(5), noam.peak(), 1e-15);
  EXPECT_EQ(unknown_end.with_decay_end(4).decay_end, 11);
  EXPECT_EQ(unknown_end.with_decay_end(11).learning_rate(11), 0.0);
  EXPECT_THROW(unknown_end.with_decay_end(0), Error);
}

// A time budget's end estimated again during the decay moves the end from that update on: the
// rate there is unchanged and then runs on the same shape to zero at the new end.
TEST(NoamSchedule, ADecaysEndMovedDuringTheDecayKeepsTheRateContinuous) {
  for (ScheduleShape shape : {ScheduleShape::linear, ScheduleShape::cosine}) {
    NoamSchedule first{64, 10, 2.0};
    first.shape = shape;
    first = first.with_decay_end(110);  // progress 0.4 at update 50
    const NoamSchedule later = first.with_decay_end_from(50, 160);
    const NoamSchedule sooner = first.with_decay_end_from(50, 80);
    for (int64_t step = 1; step <= 50; ++step) {
      EXPECT_NEAR(later.learning_rate(step), first.learning_rate(step), 1e-15) << step;
      EXPECT_NEAR(sooner.learning_rate(step), first.learning_rate(step), 1e-15) << step;
    }
    EXPECT_EQ(later.decay_from, 50);
    EXPECT_DOUBLE_EQ(later.decay_from_progress, 0.4);
    // The progress runs from 0.4 at update 50 to 1 at the new end: 0.7 halfway.
    EXPECT_DOUBLE_EQ(later.decay_progress(105), 0.7);
    EXPECT_DOUBLE_EQ(sooner.decay_progress(65), 0.7);
    const double peak = first.peak();
    const double at_seventy = shape == ScheduleShape::linear
                                  ? peak * 0.3
                                  : peak * 0.5 * (1.0 + std::cos(std::acos(-1.0) * 0.7));
    EXPECT_NEAR(later.learning_rate(105), at_seventy, 1e-15);
    EXPECT_NEAR(sooner.learning_rate(65), at_seventy, 1e-15);
    EXPECT_GT(later.learning_rate(159), 0.0);
    EXPECT_EQ(later.learning_rate(160), 0.0);
    EXPECT_EQ(sooner.learning_rate(80), 0.0);
    for (int64_t step = 11; step <= 170; ++step) {
      EXPECT_LE(later.learning_rate(step), later.learning_rate(step - 1)) << step;
      EXPECT_LE(sooner.learning_rate(step), sooner.learning_rate(step - 1)) << step;
    }
    // Moved twice: anchored at the second move, from the first move's line.
    const NoamSchedule twice = later.with_decay_end_from(105, 130);
    EXPECT_DOUBLE_EQ(twice.decay_from_progress, 0.7);
    EXPECT_NEAR(twice.learning_rate(105), later.learning_rate(105), 1e-15);
    EXPECT_EQ(twice.learning_rate(130), 0.0);
    // An end not after the update moves just past it; within the warmup it is with_decay_end,
    // which also drops an anchor.
    EXPECT_EQ(first.with_decay_end_from(50, 40).decay_end, 51);
    const NoamSchedule in_warmup = first.with_decay_end_from(8, 200);
    EXPECT_EQ(in_warmup.decay_from, 0);
    EXPECT_EQ(in_warmup.learning_rate(105), first.with_decay_end(200).learning_rate(105));
    EXPECT_EQ(later.with_decay_end(160).decay_from, 0);
  }
}

TEST(NoamSchedule, ShapesHaveNames) {
  EXPECT_EQ(parse_schedule_shape("noam", "k"), ScheduleShape::noam);
  EXPECT_EQ(parse_schedule_shape("linear", "k"), ScheduleShape::linear);
  EXPECT_EQ(parse_schedule_shape("cosine", "k"), ScheduleShape::cosine);
  for (ScheduleShape shape : {ScheduleShape::noam, ScheduleShape::linear, ScheduleShape::cosine})
    EXPECT_EQ(parse_schedule_shape(schedule_shape_name(shape), "k"), shape);
  try {
    parse_schedule_shape("inverse_sqrt", "optimizer.schedule");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "optimizer.schedule must be noam, linear or cosine, got 'inverse_sqrt'");
  }
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

// As torch.optim.AdamW: each parameter first decays by lr * weight_decay of itself, then takes
// Adam's step; a zero gradient still decays the weight.
TEST(Adam, AWeightDecayShrinksTheWeightsAsAdamW) {
  Tensor p = Tensor::from_floats({3}, {0.5f, -1.0f, 2.0f});
  p.set_requires_grad(true);
  const double decay = 0.1;
  Adam adam({p}, AdamOptions{0.9, 0.98, 1e-9, decay});
  double ref_p[3] = {0.5, -1.0, 2.0}, m[3] = {0, 0, 0}, v[3] = {0, 0, 0};
  const double grads[3][3] = {{0.1, -0.2, 0.0}, {0.05, 0.4, 0.0}, {-0.3, 0.0, 0.0}};
  for (int t = 1; t <= 3; ++t) {
    GradTarget g = grad_target(p);
    for (int i = 0; i < 3; ++i) g.tensor.data<float>()[i] = static_cast<float>(grads[t - 1][i]);
    const double lr = 0.01 * t;
    adam.step(lr);
    adam.zero_grad();
    for (int i = 0; i < 3; ++i) {
      const double gi = grads[t - 1][i];
      m[i] = 0.9 * m[i] + 0.1 * gi;
      v[i] = 0.98 * v[i] + 0.02 * gi * gi;
      const double mhat = m[i] / (1 - std::pow(0.9, t)), vhat = v[i] / (1 - std::pow(0.98, t));
      ref_p[i] = (1 - lr * decay) * ref_p[i] - lr * mhat / (std::sqrt(vhat) + 1e-9);
    }
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(p.to_floats()[i], ref_p[i], 1e-6) << t << "," << i;
  }
  // The third weight's gradient is always 0: decay alone, 2 x 0.999 x 0.998 x 0.997.
  EXPECT_NEAR(p.to_floats()[2], 2.0 * 0.999 * 0.998 * 0.997, 1e-6);
  EXPECT_LT(p.to_floats()[2], 2.0f);
}

// Parameters of `sizes` in one flat buffer laid out as `layout`, with gradient buffers laid out
// by GradientBuckets (the gradients of the last parameter first), as TrainingSession has them.
struct FlatModel {
  FlatParameters parameters;
  std::vector<Tensor> tensors;
  std::unique_ptr<dist::Communicator> communicator = dist::make_single_process();
  std::unique_ptr<GradientBuckets> buckets;

  FlatModel(const std::vector<int64_t>& sizes, FlatLayout layout) {
    nn::NamedTensors named;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<float> values(static_cast<size_t>(sizes[i]));
      for (float& x : values) x = normal(rng);
      named.emplace_back(fmt::format("p{}", i), Tensor::from_floats({sizes[i]}, values));
    }
    parameters = flatten(named, Device::cpu, layout);
    for (auto& [name, t] : parameters.views) {
      t.set_requires_grad(true);
      tensors.push_back(t);
    }
    buckets = std::make_unique<GradientBuckets>(tensors, *communicator, 1 << 20);
  }
  // Gradients drawn from `seed` for the parameters whose entry in `given` is true.
  void set_gradients(uint32_t seed, const std::vector<bool>& given) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.1f);
    for (size_t i = 0; i < tensors.size(); ++i) {
      tensors[i].zero_grad();
      if (!given[i]) continue;
      GradTarget g = grad_target(tensors[i]);
      for (int64_t j = 0; j < g.tensor.numel(); ++j) g.tensor.data<float>()[j] = normal(rng);
    }
  }
};

TEST(Adam, OnePassOverFlatBuffersEqualsTheUpdateTensorByTensor) {
  // Sizes on both sides of the kernel's threshold for sharing a tensor between threads.
  const std::vector<int64_t> sizes = {5, 40000, 7, 128, 33000};
  FlatModel flat(sizes, FlatLayout::reversed), each(sizes, FlatLayout::reversed);
  Adam one_pass(flat.tensors), by_tensor(each.tensors);
  ASSERT_TRUE(one_pass.use_flat(flat.parameters.flat, flat.buckets->flat()));
  EXPECT_TRUE(one_pass.uses_flat());
  EXPECT_FALSE(by_tensor.uses_flat());
  const std::vector<bool> all(sizes.size(), true), some = {true, false, true, true, false};
  for (int t = 1; t <= 4; ++t) {
    // The third update leaves two parameters without a gradient: they (and their moments) stay.
    const std::vector<bool>& given = t == 3 ? some : all;
    flat.set_gradients(static_cast<uint32_t>(t), given);
    each.set_gradients(static_cast<uint32_t>(t), given);
    EXPECT_EQ(one_pass.flat_gradients_complete(), t != 3) << t;
    const std::vector<float> before = flat.parameters.flat.to_floats();
    const std::vector<float> second_before = flat.tensors[1].to_floats();
    one_pass.step(0.01 * t);
    by_tensor.step(0.01 * t);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto a = flat.tensors[i].to_floats(), b = each.tensors[i].to_floats();
      const auto ma = one_pass.first_moments()[i].to_floats();
      const auto mb = by_tensor.first_moments()[i].to_floats();
      const auto va = one_pass.second_moments()[i].to_floats();
      const auto vb = by_tensor.second_moments()[i].to_floats();
      for (size_t j = 0; j < a.size(); ++j) {
        ASSERT_EQ(a[j], b[j]) << "step " << t << ", parameter " << i << ", element " << j;
        ASSERT_EQ(ma[j], mb[j]) << "step " << t << ", parameter " << i << ", element " << j;
        ASSERT_EQ(va[j], vb[j]) << "step " << t << ", parameter " << i << ", element " << j;
      }
    }
    // Something moved, and on the third update only the parameters with a gradient did.
    const std::vector<float> after = flat.parameters.flat.to_floats();
    EXPECT_NE(before, after) << t;
    if (t == 3) {
      EXPECT_EQ(flat.tensors[1].to_floats(), second_before);
    }
  }
}

TEST(Adam, UseFlatRefusesBuffersLaidOutUnlike) {
  // Parameters in order, gradients reversed: the offsets differ, so Adam keeps its own moments.
  FlatModel model({3, 10, 6}, FlatLayout::in_order);
  Adam adam(model.tensors);
  EXPECT_FALSE(adam.use_flat(model.parameters.flat, model.buckets->flat()));
  EXPECT_FALSE(adam.uses_flat());
  // One parameter alone lies at offset 0 of both.
  FlatModel single({12}, FlatLayout::in_order);
  Adam alone(single.tensors);
  EXPECT_TRUE(alone.use_flat(single.parameters.flat, single.buckets->flat()));
}

TEST(FlatParameters, AReversedLayoutKeepsTheViewsInTheOrderGiven) {
  nn::NamedTensors named = {{"a", Tensor::from_floats({2}, {1, 2})},
                            {"b", Tensor::from_floats({3}, {3, 4, 5})}};
  FlatParameters in_order = flatten(named),
                 reversed = flatten(named, Device::cpu, FlatLayout::reversed);
  EXPECT_EQ(in_order.flat.to_floats(), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(reversed.flat.to_floats(), (std::vector<float>{3, 4, 5, 1, 2}));
  ASSERT_EQ(reversed.views.size(), 2u);
  EXPECT_EQ(reversed.views[0].first, "a");
  EXPECT_EQ(reversed.views[0].second.to_floats(), (std::vector<float>{1, 2}));
  EXPECT_EQ(reversed.views[1].second.to_floats(), (std::vector<float>{3, 4, 5}));
}

}  // namespace
}  // namespace tfm::internal
