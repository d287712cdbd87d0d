// The model variants of other toolkits (config keys activation, tie_embeddings, output_bias,
// scale_embeddings, sinusoid, position_offset, decoder_start_id, decoder_layers;
// docs/MODEL_FORMAT.md) against PyTorch. tests/fixtures/variants/<group> were written by
// `tools/make_reference_fixture.py --variant all` (the reference model extended with the same
// keys, computed in float64), one small model per group (marian, huggingface, fairseq, depths)
// that sets several keys off their defaults at once: logits, loss, every gradient and 5 Adam steps,
// as the base model's fixture (test_reference_model.cc); then the inference paths (incremental
// decoding, packed f32, bf16 and int8, greedy translation from decoder_start_id) against the same
// logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "build_paths.h"
#include "tfm/autograd/tape.h"
#include "tfm/decode/inference_model.h"
#include "tfm/decode/translate.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/model/parameters.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"
#include "tfm/train/schedule.h"

namespace tfm::internal {
namespace {

std::string fixture(const std::string& group) {
  return std::string(tfm_source_dir()) + "/tests/fixtures/variants/" + group;
}

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

class ReferenceVariant : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    loaded_ = load_model_dir(fixture(GetParam()));
    reference_ = read_safetensors(fixture(GetParam()) + "/reference.safetensors");
    model_ = std::make_unique<nn::Transformer>(loaded_.config);
    model_->load(loaded_.parameters);
    batch_ = nn::Batch::from_ids(reference_.get("src"), reference_.get("tgt_in"),
                                 reference_.get("tgt_out"), loaded_.config.pad_id);
  }

  ops::CrossEntropyResult loss_with_tape(Tape& tape) {
    TapeScope scope(tape);
    auto ctx = nn::ForwardContext::training(1);  // dropout is 0 in the fixtures
    return model_->loss(batch_, ctx);
  }

  // The logits [B, T, V] of the fixture's batch by incremental decoding (one decode_step per
  // target position, fed the batch's tgt_in) with an inference model of `options`.
  std::vector<float> incremental_logits(const decode::InferenceOptions& options) const {
    const decode::InferenceModel packed(nn::Transformer(loaded_.config, loaded_.parameters),
                                        options);
    const nn::Transformer& model = packed.transformer();
    auto ctx = nn::ForwardContext::inference(options.precision);
    const Tensor memory = model.encode(batch_.src, batch_.src_lengths, ctx);
    const int64_t rows = batch_.tgt_in.dim(0), steps = batch_.tgt_in.dim(1);
    const int64_t vocab = loaded_.config.vocab_size;
    nn::DecoderState state =
        model.start_decoding(memory, batch_.src_lengths, 1, steps, options.precision);
    const std::vector<int32_t> tgt_in = batch_.tgt_in.to_ints();
    std::vector<float> out(static_cast<size_t>(rows * steps * vocab));
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<int32_t> column;
      for (int64_t r = 0; r < rows; ++r)
        column.push_back(tgt_in[static_cast<size_t>(r * steps + t)]);
      const std::vector<float> logits =
          model.decode_step(Tensor::from_ints({rows}, column), state).to_floats();
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(logits.begin() + r * vocab, vocab, out.begin() + (r * steps + t) * vocab);
    }
    return out;
  }

  LoadedModel loaded_;
  SafeTensors reference_;
  std::unique_ptr<nn::Transformer> model_;
  nn::Batch batch_;
};

TEST_P(ReferenceVariant, ConfigurationIsTheGroupsAndParametersAreTheSpecs) {
  const ModelConfig& c = loaded_.config;
  const ModelConfig defaults;
  // Each group sets variant keys off their defaults (the fixture would test nothing new else).
  int changed = 0;
  changed += c.activation != defaults.activation;
  changed += c.tie_embeddings != defaults.tie_embeddings;
  changed += c.output_bias != defaults.output_bias;
  changed += c.scale_embeddings != defaults.scale_embeddings;
  changed += c.sinusoid != defaults.sinusoid;
  changed += c.position_offset != defaults.position_offset;
  changed += c.decoder_start_id != defaults.decoder_start_id;
  changed += c.decoder_layers != defaults.decoder_layers;
  EXPECT_GE(changed, 3);
  // The model's parameters are parameter_specs' list, in its order.
  const std::vector<ParameterSpec> specs = parameter_specs(c);
  const nn::NamedTensors params = model_->named_parameters();
  ASSERT_EQ(params.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(params[i].first, specs[i].name);
    EXPECT_EQ(params[i].second.shape(), specs[i].shape) << specs[i].name;
  }
  // The batch starts every target with the model's first decoder input.
  const std::vector<int32_t> tgt_in = batch_.tgt_in.to_ints();
  EXPECT_EQ(tgt_in[0], c.decoder_start());
}

TEST_P(ReferenceVariant, LogitsMatchPyTorch) {
  auto ctx = nn::ForwardContext::inference();
  Tensor logits = model_->forward(batch_, ctx);
  ASSERT_EQ(logits.shape(), reference_.get("logits").shape());
  EXPECT_LE(relative_error(logits.to_floats(), reference_.get("logits").to_floats()), 1e-5);
}

TEST_P(ReferenceVariant, LossAndEveryGradientMatchPyTorch) {
  Tape tape;
  ops::CrossEntropyResult result = loss_with_tape(tape);
  const float expected_loss = reference_.get("loss").to_floats()[0];
  EXPECT_NEAR(result.loss.to_floats()[0], expected_loss, 1e-5 * std::fabs(expected_loss));
  tape.backward(result.loss);
  // The key projection's bias adds q.b_k to every key's score alike, which the softmax ignores:
  // its gradient is zero but for rounding, in PyTorch as here, so it is held to the scale of all
  // the gradients instead of its own.
  double largest = 0;
  for (const auto& [name, param] : model_->named_parameters())
    for (float g : reference_.get("grad." + name).to_floats())
      largest = std::max(largest, std::fabs(static_cast<double>(g)));
  int checked = 0;
  for (const auto& [name, param] : model_->named_parameters()) {
    const Tensor& expected = reference_.get("grad." + name);
    Tensor grad = param.grad();
    ASSERT_TRUE(grad.defined()) << name << " got no gradient";
    ASSERT_EQ(grad.shape(), expected.shape()) << name;
    if (name.ends_with("k_proj.bias")) {
      const std::vector<float> got = grad.to_floats(), want = expected.to_floats();
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), 1e-4 * largest) << name;
    } else {
      EXPECT_LE(relative_error(grad.to_floats(), expected.to_floats()), 1e-4) << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(loaded_.parameters.size()));
}

// Training works with the variant: the trainer's Adam steps follow PyTorch's, and lower the loss.
TEST_P(ReferenceVariant, FiveAdamStepsMatchPyTorchAndLowerTheLoss) {
  const std::vector<float> expected = reference_.get("adam_losses").to_floats();
  ASSERT_EQ(expected.size(), 6u);
  const int64_t warmup = std::stoll(reference_.metadata.at("warmup"));
  NoamSchedule schedule{loaded_.config.d_model, warmup, 1.0};
  Adam adam(model_->parameters());
  float first = 0, last = 0;
  for (int64_t step = 1; step <= 6; ++step) {
    Tape tape;
    ops::CrossEntropyResult result = loss_with_tape(tape);
    const float loss = result.loss.to_floats()[0];
    if (step == 1) first = loss;
    last = loss;
    EXPECT_NEAR(loss, expected[step - 1], 1e-4 * std::fabs(expected[step - 1])) << "step " << step;
    if (step == 6) break;
    tape.backward(result.loss);
    adam.step(schedule.learning_rate(step));
    adam.zero_grad();
  }
  EXPECT_LT(last, first);
}

// The inference model (weights packed at load) decoding one position at a time gives the logits
// of the whole-batch forward: the decoder's positions, embeddings, activation and output bias are
// the training model's.
TEST_P(ReferenceVariant, IncrementalDecodingMatchesPyTorch) {
  const std::vector<float> expected = reference_.get("logits").to_floats();
  EXPECT_LE(relative_error(incremental_logits({}), expected), 1e-5);
}

// bf16 and int8 products honour the variants too: their logits are the reference's within the
// rounding of 8-bit mantissas (bf16) or 8-bit weights and activations (int8). A variant ignored
// on these paths moves logits by their whole scale.
TEST_P(ReferenceVariant, Bf16AndInt8DecodingFollowTheReference) {
  const std::vector<float> expected = reference_.get("logits").to_floats();
  decode::InferenceOptions bf16;
  bf16.precision = DType::bf16;
  EXPECT_LE(relative_error(incremental_logits(bf16), expected), 3e-2);
  decode::InferenceOptions int8;
  int8.int8 = true;
  EXPECT_LE(relative_error(incremental_logits(int8), expected), 5e-2);
}

// Greedy translation (the fused output layer with its bias, the search starting from
// decoder_start_id) picks the tokens that an argmax over forward()'s logits picks.
TEST_P(ReferenceVariant, GreedyTranslationFollowsTheForwardArgmax) {
  const ModelConfig& c = loaded_.config;
  const std::vector<int32_t> src = batch_.src.to_ints();
  const int64_t width = batch_.src.dim(1), max_length = 6;
  const decode::InferenceModel packed(nn::Transformer(c, loaded_.parameters), {});
  std::vector<std::vector<int32_t>> sources;
  for (int64_t r = 0; r < batch_.src.dim(0); ++r)
    sources.emplace_back(src.begin() + r * width,
                         src.begin() + r * width + batch_.src_lengths[static_cast<size_t>(r)]);
  decode::TranslateOptions options;
  options.beam_size = 1;
  options.max_length = max_length;
  const auto translated = decode::translate(packed, sources, options);
  ASSERT_EQ(translated.size(), sources.size());
  for (size_t r = 0; r < sources.size(); ++r) {
    SCOPED_TRACE("sentence " + std::to_string(r));
    std::vector<int32_t> prefix{c.decoder_start()}, expected;
    for (int64_t t = 0; t < max_length; ++t) {
      const auto n = static_cast<int64_t>(prefix.size());
      const Tensor source =
          Tensor::from_ints({1, static_cast<int64_t>(sources[r].size())}, sources[r]);
      const Tensor target = Tensor::from_ints({1, n}, prefix);
      // forward() reads no tgt_out; eos everywhere is a valid one (the prefix may hold pad ids:
      // the marian group starts from the pad id).
      const Tensor unread =
          Tensor::from_ints({1, n}, std::vector<int32_t>(prefix.size(), c.eos_id));
      auto ctx = nn::ForwardContext::inference();
      const std::vector<float> logits =
          model_->forward(nn::Batch::from_ids(source, target, unread, c.pad_id), ctx).to_floats();
      const auto last = logits.begin() + (n - 1) * c.vocab_size;
      const auto best = static_cast<int32_t>(std::max_element(last, last + c.vocab_size) - last);
      if (best == c.eos_id) break;
      expected.push_back(best);
      prefix.push_back(best);
    }
    EXPECT_EQ(translated[r].front().tokens, expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, ReferenceVariant,
                         ::testing::Values("marian", "huggingface", "fairseq", "depths"));

}  // namespace
}  // namespace tfm::internal
