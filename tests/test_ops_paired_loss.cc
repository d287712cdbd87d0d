// ops::paired_output_cross_entropy (R-Drop's loss: two passes' cross-entropy and their symmetric
// KL divergence): against a double reference and finite differences, against output_cross_entropy
// where the consistency term is 0 (weight 0, or two equal passes), for every chunk size, and with
// bf16 products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_f32_values;
using testing::relative_error;
using testing::Values;

constexpr int32_t kIgnore = -100;

// sum over counted rows of the label-smoothed cross-entropy, plus weight times each counted pair's
// (KL(p || q) + KL(q || p)) / 2, in double.
double paired_loss_reference(const Values& h, const Values& w, const std::vector<int32_t>& y,
                             int64_t d, int64_t vocab, double eps, double weight) {
  const int64_t rows = static_cast<int64_t>(y.size()), half = rows / 2;
  std::vector<Values> lp;
  for (int64_t r = 0; r < rows; ++r)
    lp.push_back(testing::log_softmax_of_product(h, w, r, d, vocab));
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] == kIgnore) continue;
    for (int64_t j = 0; j < vocab; ++j)
      total -= ((j == y[r] ? 1 - eps : 0) + eps / vocab) * lp[r][j];
  }
  for (int64_t r = 0; r < half; ++r) {
    if (y[r] == kIgnore) continue;
    double symmetric = 0;
    for (int64_t j = 0; j < vocab; ++j)
      symmetric += (std::exp(lp[r][j]) - std::exp(lp[half + r][j])) * (lp[r][j] - lp[half + r][j]);
    total += weight * symmetric / 2;
  }
  return total;
}

TEST(OpsPairedOutputCrossEntropy, ForwardAndGradientsAgainstDoubleReference) {
  // 2 x 5 rows (row 2 and its pair ignored) in chunks of 2 (the last one partial); the two halves
  // are different hidden states (two passes), so the KL term is far from 0.
  const int64_t d = 4, vocab = 9;
  const std::vector<int32_t> targets = {3, 8, kIgnore, 0, 5, 3, 8, kIgnore, 0, 5};
  unsigned seed = 60;
  for (float weight : {0.0f, 1.0f, 5.0f}) {
    for (double normalizer : {0.0, 12.5}) {
      SCOPED_TRACE(::testing::Message() << "weight " << weight << ", normalizer " << normalizer);
      std::mt19937 rng(seed++);
      Values h = random_f32_values(10 * d, rng, -2.0, 2.0), w = random_f32_values(vocab * d, rng);
      const double norm = normalizer > 0 ? normalizer : 8.0;
      testing::GradCheckOptions options;
      options.seed = 3;
      testing::check_op(
          {{Shape{10, d}, h}, {Shape{vocab, d}, w}},
          [&](const std::vector<Tensor>& t) {
            ops::CrossEntropyResult result = ops::paired_output_cross_entropy(
                t[0], t[1], Tensor::from_ints({10}, targets), 0.1f, kIgnore, weight, normalizer, 2);
            EXPECT_EQ(result.tokens, 8);
            EXPECT_GT(result.consistency_sum, 0.01);
            return result.loss;
          },
          [&](const std::vector<Values>& v) {
            return Values{paired_loss_reference(v[0], v[1], targets, d, vocab, 0.1, weight) / norm};
          },
          options);
    }
  }
}

struct Outcome {
  float loss = 0;
  double nll_sum = 0, consistency_sum = 0;
  int64_t tokens = 0;
  std::vector<float> dhidden, dweight;
};

// The loss of hidden [rows, d] against weight, paired (with `weight_kl`) or not, backward seeded
// with 0.7.
Outcome run_loss(bool paired, const std::vector<float>& hidden_values,
                 const std::vector<float>& weight_values, const std::vector<int32_t>& y, int64_t d,
                 float weight_kl, int64_t chunk_rows, DType product = DType::f32) {
  const int64_t rows = static_cast<int64_t>(y.size());
  const int64_t vocab = static_cast<int64_t>(weight_values.size()) / d;
  Tensor hidden = Tensor::from_floats({rows, d}, hidden_values);
  Tensor weight = Tensor::from_floats({vocab, d}, weight_values);
  hidden.set_requires_grad(true);
  weight.set_requires_grad(true);
  Tape tape;
  ops::CrossEntropyResult result;
  {
    TapeScope scope(tape);
    const Tensor targets = Tensor::from_ints({rows}, y);
    result = paired ? ops::paired_output_cross_entropy(hidden, weight, targets, 0.1f, kIgnore,
                                                       weight_kl, 0, chunk_rows, product)
                    : ops::output_cross_entropy(hidden, weight, targets, 0.1f, kIgnore, 0,
                                                chunk_rows, product);
  }
  tape.backward(result.loss, Tensor::full(Shape{}, 0.7f));
  return {result.loss.to_floats()[0], result.nll_sum,
          result.consistency_sum,     result.tokens,
          hidden.grad().to_floats(),  weight.grad().to_floats()};
}

struct PairedCase {
  std::vector<float> hidden, weight;
  std::vector<int32_t> targets;
};

// 2 x `half` rows over `vocab` words (above the kernels' parallel threshold), every 7th row of
// each half ignored; the second half is the first plus noise of `spread` (0: two equal passes).
PairedCase paired_case(int64_t half, int64_t vocab, int64_t d, double spread, unsigned seed) {
  std::mt19937 rng(seed);
  PairedCase c;
  c.hidden = testing::to_float_vector(random_f32_values(2 * half * d, rng));
  c.weight = testing::to_float_vector(random_f32_values(vocab * d, rng));
  std::normal_distribution<float> noise(0.0f, static_cast<float>(spread));
  for (int64_t i = 0; i < half * d; ++i)
    c.hidden[half * d + i] = c.hidden[i] + (spread > 0 ? noise(rng) : 0.0f);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab) - 1);
  c.targets.resize(static_cast<size_t>(2 * half));
  for (int64_t r = 0; r < half; ++r)
    c.targets[r] = c.targets[half + r] = r % 7 == 3 ? kIgnore : pick(rng);
  return c;
}

TEST(OpsPairedOutputCrossEntropy, WithoutConsistencyIsTheCrossEntropyOfBothPasses) {
  PairedCase c = paired_case(30, 400, 16, 0.3, 61);
  const Outcome plain = run_loss(false, c.hidden, c.weight, c.targets, 16, 0.0f, 0);
  const Outcome paired = run_loss(true, c.hidden, c.weight, c.targets, 16, 0.0f, 0);
  EXPECT_EQ(paired.tokens, plain.tokens);
  EXPECT_NEAR(paired.loss, plain.loss, 1e-6 * plain.loss);
  EXPECT_NEAR(paired.nll_sum, plain.nll_sum, 1e-6 * plain.nll_sum);
  EXPECT_LT(relative_error(paired.dhidden, plain.dhidden), 1e-6);
  EXPECT_LT(relative_error(paired.dweight, plain.dweight), 1e-6);
  EXPECT_GT(paired.consistency_sum, 0.0);  // reported, though its weight is 0
}

TEST(OpsPairedOutputCrossEntropy, TwoEqualPassesHaveNoConsistencyTerm) {
  // p = q: the KL divergences and their gradients are 0, whatever the weight.
  PairedCase c = paired_case(30, 400, 16, 0.0, 62);
  const Outcome plain = run_loss(false, c.hidden, c.weight, c.targets, 16, 0.0f, 0);
  const Outcome paired = run_loss(true, c.hidden, c.weight, c.targets, 16, 5.0f, 0);
  EXPECT_NEAR(paired.consistency_sum, 0.0, 1e-5);
  EXPECT_NEAR(paired.loss, plain.loss, 1e-6 * plain.loss);
  EXPECT_LT(relative_error(paired.dhidden, plain.dhidden), 1e-5);
  EXPECT_LT(relative_error(paired.dweight, plain.dweight), 1e-5);
}

TEST(OpsPairedOutputCrossEntropy, EveryChunkSizeGivesTheSameResult) {
  PairedCase c = paired_case(40, 300, 24, 0.5, 63);
  const Outcome whole = run_loss(true, c.hidden, c.weight, c.targets, 24, 3.0f, 40);
  EXPECT_GT(whole.consistency_sum, 0.1);
  for (int64_t chunk : {1, 7, 16, 64, 0}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    const Outcome got = run_loss(true, c.hidden, c.weight, c.targets, 24, 3.0f, chunk);
    EXPECT_EQ(got.tokens, whole.tokens);
    EXPECT_NEAR(got.loss, whole.loss, 1e-6 * whole.loss);
    EXPECT_NEAR(got.consistency_sum, whole.consistency_sum, 1e-6 * whole.consistency_sum);
    EXPECT_LT(relative_error(got.dhidden, whole.dhidden), 1e-6);
    EXPECT_LT(relative_error(got.dweight, whole.dweight), 1e-5);
  }
}

TEST(OpsPairedOutputCrossEntropy, Bf16ProductsStayCloseToF32) {
  PairedCase c = paired_case(32, 300, 32, 0.5, 64);
  const Outcome f32 = run_loss(true, c.hidden, c.weight, c.targets, 32, 2.0f, 16);
  const Outcome bf16 = run_loss(true, c.hidden, c.weight, c.targets, 32, 2.0f, 16, DType::bf16);
  // bf16 operands round to 2^-9 relative: close to f32, and not equal to it (the bf16 path ran).
  EXPECT_NEAR(bf16.loss, f32.loss, 1e-2 * f32.loss);
  EXPECT_LT(relative_error(bf16.dweight, f32.dweight), 3e-2);
  EXPECT_LT(relative_error(bf16.dhidden, f32.dhidden), 3e-2);
  EXPECT_GT(relative_error(bf16.dweight, f32.dweight), 1e-4);
}

TEST(OpsPairedOutputCrossEntropy, BadArgumentsThrow) {
  Tensor w = Tensor::zeros({5, 4});
  auto message_of = [&](const Tensor& h, const std::vector<int32_t>& y, float weight) {
    try {
      ops::paired_output_cross_entropy(h, w, Tensor::from_ints({static_cast<int64_t>(y.size())}, y),
                                       0.1f, kIgnore, weight);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of(Tensor::zeros({4, 4}), {0, 1, 0, 1}, 1.0f), "no error");
  EXPECT_NE(message_of(Tensor::zeros({3, 4}), {0, 1, 0}, 1.0f)
                .find("3 rows cannot be two passes of the same rows"),
            std::string::npos);
  EXPECT_NE(message_of(Tensor::zeros({4, 4}), {0, 1, 0, 2}, 1.0f)
                .find("target 1 of row 1 differs from its pair's, 2 (row 3)"),
            std::string::npos);
  EXPECT_NE(message_of(Tensor::zeros({4, 4}), {0, 1, 0, 1}, -1.0f)
                .find("the consistency weight must be finite and >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(message_of(Tensor::zeros({4, 4}), {0, 1, 0, 1}, NAN).find("finite"), std::string::npos);
}

}  // namespace
}  // namespace tfm::internal
