// The whole model against PyTorch. tests/fixtures/tiny was written by
// tools/make_reference_fixture.py (a plain-PyTorch implementation of the same model, computed in
// float64): initial weights, a padded batch of 3 sentence pairs, the logits, the label-smoothed
// loss, every parameter's gradient, and the losses of 5 Adam steps with the paper's schedule. CI
// needs no PyTorch: the fixture is committed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "build_paths.h"
#include "tfm/autograd/tape.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"
#include "tfm/train/schedule.h"

namespace tfm::internal {
namespace {

const std::string kFixture = std::string(tfm_source_dir()) + "/tests/fixtures/tiny";

// max_i |a_i - b_i| / max_i |b_i|: the error relative to the tensor's scale.
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double max_diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(actual[i]) - expected[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(expected[i])));
  }
  EXPECT_GT(scale, 0.0) << "reference values are all zero";
  return max_diff / scale;
}

class ReferenceModel : public ::testing::Test {
 protected:
  void SetUp() override {
    loaded_ = load_model_dir(kFixture);
    reference_ = read_safetensors(kFixture + "/reference.safetensors");
    model_ = std::make_unique<nn::Transformer>(loaded_.config);
    model_->load(loaded_.parameters);
    batch_ = nn::Batch::from_ids(reference_.get("src"), reference_.get("tgt_in"),
                                 reference_.get("tgt_out"), loaded_.config.pad_id);
  }

  ops::CrossEntropyResult loss_with_tape(Tape& tape, Tensor* logits = nullptr) {
    TapeScope scope(tape);
    auto ctx = nn::ForwardContext::training(1);  // dropout is 0 in the fixture's config
    if (logits == nullptr) return model_->loss(batch_, ctx);
    *logits = model_->forward(batch_, ctx);
    return {};
  }

  LoadedModel loaded_;
  SafeTensors reference_;
  std::unique_ptr<nn::Transformer> model_;
  nn::Batch batch_;
};

TEST_F(ReferenceModel, FixtureIsAPaddedBatchWithoutDropout) {
  EXPECT_EQ(loaded_.config.dropout, 0.0);
  EXPECT_EQ(batch_.size(), 3);
  // Three different source lengths: padding is exercised.
  std::vector<int32_t> lengths = batch_.src_lengths;
  std::sort(lengths.begin(), lengths.end());
  EXPECT_LT(lengths[0], lengths[1]);
  EXPECT_LT(lengths[1], lengths[2]);
}

TEST_F(ReferenceModel, LogitsMatchPyTorch) {
  auto ctx = nn::ForwardContext::inference();
  Tensor logits = model_->forward(batch_, ctx);
  ASSERT_EQ(logits.shape(), reference_.get("logits").shape());
  EXPECT_LE(relative_error(logits.to_floats(), reference_.get("logits").to_floats()), 1e-5);
}

TEST_F(ReferenceModel, LossAndEveryGradientMatchPyTorch) {
  Tape tape;
  ops::CrossEntropyResult result = loss_with_tape(tape);
  float expected_loss = reference_.get("loss").to_floats()[0];
  EXPECT_NEAR(result.loss.to_floats()[0], expected_loss, 1e-5 * std::fabs(expected_loss));
  tape.backward(result.loss);
  int checked = 0;
  for (const auto& [name, param] : model_->named_parameters()) {
    const Tensor& expected = reference_.get("grad." + name);
    Tensor grad = param.grad();
    ASSERT_TRUE(grad.defined()) << name << " got no gradient";
    ASSERT_EQ(grad.shape(), expected.shape()) << name;
    EXPECT_LE(relative_error(grad.to_floats(), expected.to_floats()), 1e-4) << name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(loaded_.parameters.size()));
}

TEST_F(ReferenceModel, FiveAdamStepsMatchPyTorch) {
  std::vector<float> expected = reference_.get("adam_losses").to_floats();
  ASSERT_EQ(expected.size(), 6u);
  int64_t warmup = std::stoll(reference_.metadata.at("warmup"));
  NoamSchedule schedule{loaded_.config.d_model, warmup, 1.0};
  Adam adam(model_->parameters());
  for (int64_t step = 1; step <= 6; ++step) {
    Tape tape;
    ops::CrossEntropyResult result = loss_with_tape(tape);
    float loss = result.loss.to_floats()[0];
    EXPECT_NEAR(loss, expected[step - 1], 1e-4 * std::fabs(expected[step - 1])) << "step " << step;
    if (step == 6) break;
    tape.backward(result.loss);
    adam.step(schedule.learning_rate(step));
    adam.zero_grad();
  }
  EXPECT_LT(expected[5], expected[0]) << "the reference run should learn";
}

}  // namespace
}  // namespace tfm::internal
