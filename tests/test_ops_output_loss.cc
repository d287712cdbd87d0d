// ops::output_cross_entropy (the chunked output projection with its loss): against a double
// reference and finite differences, against the unfused cross_entropy(linear(h, W)) in f32 and
// with bf16 products (loss and both gradients), and on its memory: the [N, V] logits never exist.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/core/allocator.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_f32_values;
using testing::relative_error;
using testing::Values;

constexpr int32_t kIgnore = -100;

// sum over counted rows of -sum_j q_j log softmax(h W^T)_j, in double.
double output_loss_reference(const Values& h, const Values& w, const std::vector<int32_t>& y,
                             int64_t d, int64_t vocab, double eps, int32_t ignore) {
  double total = 0;
  for (size_t r = 0; r < y.size(); ++r) {
    if (y[r] == ignore) continue;
    const Values lp = testing::log_softmax_of_product(h, w, static_cast<int64_t>(r), d, vocab);
    for (int64_t j = 0; j < vocab; ++j) total -= ((j == y[r] ? 1 - eps : 0) + eps / vocab) * lp[j];
  }
  return total;
}

TEST(OpsOutputCrossEntropy, ForwardAndGradientsAgainstDoubleReference) {
  // 8 rows in chunks of 3 (the last one partial), rows 2 and 5 ignored.
  const int64_t d = 5, vocab = 11;
  const std::vector<int32_t> targets = {3, 10, kIgnore, 0, 7, kIgnore, 4, 4};
  unsigned seed = 40;
  for (float eps : {0.0f, 0.1f}) {
    for (double normalizer : {0.0, 7.5}) {
      SCOPED_TRACE(::testing::Message() << "eps " << eps << ", normalizer " << normalizer);
      std::mt19937 rng(seed++);
      Values h = random_f32_values(8 * d, rng), w = random_f32_values(vocab * d, rng);
      const double norm = normalizer > 0 ? normalizer : 6.0;
      // A scalar output: check_op's seed 3 draws an upstream gradient of -0.86 (see
      // test_ops_cross_entropy.cc), large enough for the absolute tolerance.
      testing::GradCheckOptions options;
      options.seed = 3;
      testing::check_op(
          {{Shape{2, 4, d}, h}, {Shape{vocab, d}, w}},
          [&](const std::vector<Tensor>& t) {
            ops::CrossEntropyResult result = ops::output_cross_entropy(
                t[0], t[1], Tensor::from_ints({8}, targets), eps, kIgnore, normalizer, 3);
            EXPECT_EQ(result.tokens, 6);
            return result.loss;
          },
          [&](const std::vector<Values>& v) {
            return Values{output_loss_reference(v[0], v[1], targets, d, vocab, eps, kIgnore) /
                          norm};
          },
          options);
    }
  }
}

struct LossAndGrads {
  float loss = 0;
  double nll_sum = 0;
  int64_t tokens = 0;
  std::vector<float> dweight;
};

// The model's pattern: hidden = embedding(ids, W) (any differentiable function of W would do),
// then the loss of hidden against W, so that W's gradient sums the loss's part with another one.
// The backward is seeded with `upstream` instead of 1.
LossAndGrads run_shared_weight_loss(bool fused, Tensor table, const Tensor& ids,
                                    const Tensor& targets, float eps, double normalizer,
                                    int64_t chunk_rows, float upstream,
                                    DType product = DType::f32) {
  table.zero_grad();
  Tape tape;
  ops::CrossEntropyResult result;
  {
    TapeScope scope(tape);
    Tensor hidden = ops::embedding(ids, table, 0.75f);
    const int64_t rows = targets.dim(0), vocab = table.dim(0);
    result = fused ? ops::output_cross_entropy(hidden, table, targets, eps, kIgnore, normalizer,
                                               chunk_rows, product)
                   : ops::cross_entropy(
                         ops::reshape(ops::linear(hidden, table, {}, {product}), {rows, vocab}),
                         targets, eps, kIgnore, normalizer);
  }
  tape.backward(result.loss, Tensor::full(Shape{}, upstream));
  return {result.loss.to_floats()[0], result.nll_sum, result.tokens, table.grad().to_floats()};
}

struct SharedWeightCase {
  Tensor table, ids, targets;
};

SharedWeightCase shared_weight_case(int64_t batch, int64_t time, int64_t vocab, int64_t d,
                                    unsigned seed) {
  std::mt19937 rng(seed);
  SharedWeightCase c;
  c.table =
      Tensor::from_floats({vocab, d}, testing::to_float_vector(random_f32_values(vocab * d, rng)));
  c.table.set_requires_grad(true);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> ids(static_cast<size_t>(batch * time)), y(ids.size());
  for (auto& v : ids) v = pick(rng);
  for (auto& v : y) v = pick(rng);
  for (size_t i = 0; i < y.size(); i += 7) y[i] = kIgnore;
  c.ids = Tensor::from_ints({batch, time}, ids);
  c.targets = Tensor::from_ints({batch * time}, y);
  return c;
}

TEST(OpsOutputCrossEntropy, EqualsTheUnfusedCompositionForEveryChunkSize) {
  // 5 x 10 = 50 rows (every 7th ignored), 300 words: above the kernels' parallel threshold.
  SharedWeightCase c = shared_weight_case(5, 10, 300, 24, 41);
  for (double normalizer : {0.0, 33.0}) {
    LossAndGrads expected =
        run_shared_weight_loss(false, c.table, c.ids, c.targets, 0.1f, normalizer, 0, 0.37f);
    for (int64_t chunk : {1, 7, 16, 50, 64, 0}) {
      SCOPED_TRACE(::testing::Message() << "chunk " << chunk << ", normalizer " << normalizer);
      LossAndGrads got =
          run_shared_weight_loss(true, c.table, c.ids, c.targets, 0.1f, normalizer, chunk, 0.37f);
      EXPECT_EQ(got.tokens, expected.tokens);
      // The logits and the per-row terms are the same; only the f32 products' sums may round
      // differently.
      EXPECT_NEAR(got.loss, expected.loss, 1e-6 * std::fabs(expected.loss));
      EXPECT_NEAR(got.nll_sum, expected.nll_sum, 1e-6 * expected.nll_sum);
      EXPECT_LT(relative_error(got.dweight, expected.dweight), 1e-5);
    }
  }
}

TEST(OpsOutputCrossEntropy, WithBf16ProductsEqualsTheUnfusedComposition) {
  SharedWeightCase c = shared_weight_case(6, 9, 200, 32, 42);
  LossAndGrads f32 = run_shared_weight_loss(false, c.table, c.ids, c.targets, 0.1f, 0, 0, 1.0f);
  LossAndGrads expected =
      run_shared_weight_loss(false, c.table, c.ids, c.targets, 0.1f, 0, 0, 1.0f, DType::bf16);
  LossAndGrads got =
      run_shared_weight_loss(true, c.table, c.ids, c.targets, 0.1f, 0, 16, 1.0f, DType::bf16);
  // Same bf16 operands (the logits' gradient rounded to bf16 from the same f32 values) and f32
  // accumulation: the two agree to f32 rounding of the sums...
  EXPECT_NEAR(got.loss, expected.loss, 1e-6 * std::fabs(expected.loss));
  EXPECT_LT(relative_error(got.dweight, expected.dweight), 1e-5);
  // ...while bf16 products differ from f32 ones by ~2^-9 relative (so the bf16 path really ran).
  EXPECT_GT(relative_error(got.dweight, f32.dweight), 1e-4);
  EXPECT_GT(std::fabs(got.loss - f32.loss), 1e-6 * std::fabs(f32.loss));
}

TEST(OpsOutputCrossEntropy, HiddenGradientEqualsTheUnfusedOne) {
  // hidden is a leaf here, so its gradient is the loss's alone.
  std::mt19937 rng(43);
  const int64_t rows = 40, d = 16, vocab = 500;
  Tensor hidden =
      Tensor::from_floats({rows, d}, testing::to_float_vector(random_f32_values(rows * d, rng)));
  Tensor weight =
      Tensor::from_floats({vocab, d}, testing::to_float_vector(random_f32_values(vocab * d, rng)));
  hidden.set_requires_grad(true);
  std::vector<int32_t> y(rows);
  for (int64_t r = 0; r < rows; ++r)
    y[r] = r % 9 == 4 ? kIgnore : static_cast<int32_t>((r * 37) % vocab);
  Tensor targets = Tensor::from_ints({rows}, y);
  std::vector<float> grads[2];
  float losses[2];
  for (int fused = 0; fused < 2; ++fused) {
    hidden.zero_grad();
    Tape tape;
    ops::CrossEntropyResult result;
    {
      TapeScope scope(tape);
      result = fused ? ops::output_cross_entropy(hidden, weight, targets, 0.2f, kIgnore, 0, 9)
                     : ops::cross_entropy(ops::linear(hidden, weight), targets, 0.2f, kIgnore);
    }
    tape.backward(result.loss, Tensor::full(Shape{}, -1.5f));
    grads[fused] = hidden.grad().to_floats();
    losses[fused] = result.loss.to_floats()[0];
    EXPECT_FALSE(weight.grad().defined());  // weight needs no gradient and gets none
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * std::fabs(losses[0]));
  EXPECT_LT(relative_error(grads[1], grads[0]), 1e-5);
  // Ignored rows get exactly zero.
  for (int64_t k = 0; k < d; ++k) EXPECT_EQ(grads[1][4 * d + k], 0.0f);
}

TEST(OpsOutputCrossEntropy, NeverHoldsTheFullLogits) {
  // 1024 rows x 8192 words: the logits alone would take 32 MiB (and their gradient as much again).
  std::mt19937 rng(44);
  const int64_t rows = 1024, d = 32, vocab = 8192;
  Tensor hidden =
      Tensor::from_floats({rows, d}, testing::to_float_vector(random_f32_values(rows * d, rng)));
  Tensor weight =
      Tensor::from_floats({vocab, d}, testing::to_float_vector(random_f32_values(vocab * d, rng)));
  hidden.set_requires_grad(true);
  weight.set_requires_grad(true);
  std::vector<int32_t> y(rows);
  for (int64_t r = 0; r < rows; ++r) y[r] = static_cast<int32_t>((r * 131) % vocab);
  Tensor targets = Tensor::from_ints({rows}, y);
  CachingAllocator& allocator = CachingAllocator::cpu();
  allocator.reset_peak();
  const size_t before = allocator.stats().bytes_in_use;
  Tape tape;
  ops::CrossEntropyResult result;
  {
    TapeScope scope(tape);
    result = ops::output_cross_entropy(hidden, weight, targets, 0.1f, kIgnore, 0, 64);
  }
  tape.backward(result.loss);
  const size_t peak = allocator.stats().peak_bytes_in_use - before;
  // Chunks of 64 rows: 2 MiB of logits, plus d(weight) (1 MiB, kept for the backward, and the
  // weight's gradient buffer), d(hidden) and the per-row terms; well under a quarter of the logits.
  EXPECT_LT(peak, static_cast<size_t>(rows * vocab * 4 / 4)) << "peak " << peak << " bytes";
  EXPECT_TRUE(std::isfinite(result.loss.to_floats()[0]));
  EXPECT_TRUE(weight.grad().defined() && hidden.grad().defined());
}

TEST(OpsOutputCrossEntropy, NoCountedRowGivesZeroLossAndGradients) {
  Tensor hidden = Tensor::from_floats({2, 3}, {1.0f, -2.0f, 0.5f, 3.0f, 0.0f, 1.0f});
  Tensor weight = Tensor::from_floats({4, 3}, {0.5f, 1, -1, 2, 0, 1, -0.5f, 0.25f, 3, 1, 1, 1});
  hidden.set_requires_grad(true);
  weight.set_requires_grad(true);
  Tape tape;
  ops::CrossEntropyResult result;
  {
    TapeScope scope(tape);
    result = ops::output_cross_entropy(hidden, weight, Tensor::from_ints({2}, {kIgnore, kIgnore}),
                                       0.1f, kIgnore);
  }
  EXPECT_EQ(result.tokens, 0);
  EXPECT_EQ(result.loss.to_floats()[0], 0.0f);
  tape.backward(result.loss);
  EXPECT_EQ(hidden.grad().to_floats(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(weight.grad().to_floats(), std::vector<float>(12, 0.0f));
}

TEST(OpsOutputCrossEntropy, BadArgumentsThrow) {
  Tensor h = Tensor::zeros({3, 4}), w = Tensor::zeros({5, 4});
  Tensor y = Tensor::from_ints({3}, {0, 4, kIgnore});
  EXPECT_NO_THROW(ops::output_cross_entropy(h, w, y, 0.1f, kIgnore));
  try {
    ops::output_cross_entropy(h, w, Tensor::from_ints({3}, {0, 5, 1}), 0.0f, kIgnore);
    ADD_FAILURE() << "no error for target 5 of 5 words";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("target 5 of row 1"), std::string::npos) << message;
  }
  EXPECT_THROW(ops::output_cross_entropy(h, Tensor::zeros({5, 3}), y, 0.0f, kIgnore), Error);
  EXPECT_THROW(ops::output_cross_entropy(h, w, Tensor::from_ints({2}, {0, 1}), 0.0f, kIgnore),
               Error);
  EXPECT_THROW(ops::output_cross_entropy(h, w, Tensor::zeros({3}), 0.0f, kIgnore), Error);
  EXPECT_THROW(ops::output_cross_entropy(h, w, y, 1.5f, kIgnore), Error);
  EXPECT_THROW(ops::output_cross_entropy(h, w, y, 0.1f, kIgnore, 0.0, -1), Error);
  EXPECT_THROW(ops::output_cross_entropy(h, Tensor::zeros({5, 4}, DType::i32), y, 0.1f, kIgnore),
               Error);
}

}  // namespace
}  // namespace tfm::internal
