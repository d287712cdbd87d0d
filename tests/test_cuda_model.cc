// The whole model on a GPU against the CPU and PyTorch: the PyTorch fixture (tests/fixtures/tiny)
// on CUDA with the CPU test's tolerances, a TrainingSession update on both devices, translations
// (greedy and beam) equal to the CPU's, and model directories that are byte for byte the same
// whichever device held the weights. Skipped, saying why, without a usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "build_paths.h"
#include "cuda_test_util.h"
#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/autograd/tape.h"
#include "tfm/decode/inference_model.h"
#include "tfm/decode/translate.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"
#include "tfm/train/schedule.h"
#include "tfm/train/session.h"

namespace tfm::internal {
namespace {

const std::string kFixture = std::string(tfm_source_dir()) + "/tests/fixtures/tiny";

// max_i |a_i - b_i| / max_i |b_i|, as tests/test_reference_model.cc.
double max_relative_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<float> a = actual.to(Device::cpu).to_floats();
  const std::vector<float> b = expected.to(Device::cpu).to_floats();
  EXPECT_EQ(a.size(), b.size());
  double max_diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!std::isfinite(a[i])) return std::nan("");
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  EXPECT_GT(scale, 0.0) << "reference values are all zero";
  return max_diff / scale;
}

nn::NamedTensors on_device(const nn::NamedTensors& tensors, Device device) {
  nn::NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.to(device));
  return out;
}

class CudaReferenceModel : public ::testing::Test {
 protected:
  void SetUp() override {
    TFM_REQUIRE_CUDA();
    loaded_ = load_model_dir(kFixture);
    reference_ = read_safetensors(kFixture + "/reference.safetensors");
    model_ = std::make_unique<nn::Transformer>(loaded_.config,
                                               on_device(loaded_.parameters, Device::cuda));
    batch_ = nn::Batch::from_ids(reference_.get("src"), reference_.get("tgt_in"),
                                 reference_.get("tgt_out"), loaded_.config.pad_id)
                 .to(Device::cuda);
  }

  LoadedModel loaded_;
  SafeTensors reference_;
  std::unique_ptr<nn::Transformer> model_;
  nn::Batch batch_;
};

TEST_F(CudaReferenceModel, LogitsMatchPyTorch) {
  auto ctx = nn::ForwardContext::inference();
  Tensor logits = model_->forward(batch_, ctx);
  EXPECT_EQ(logits.device(), Device::cuda);
  ASSERT_EQ(logits.shape(), reference_.get("logits").shape());
  EXPECT_LE(max_relative_error(logits, reference_.get("logits")), 1e-5);
}

TEST_F(CudaReferenceModel, LossAndEveryGradientMatchPyTorch) {
  Tape tape;
  ops::CrossEntropyResult result;
  {
    TapeScope scope(tape);
    auto ctx = nn::ForwardContext::training(1);
    result = model_->loss(batch_, ctx);
  }
  const float expected_loss = reference_.get("loss").to_floats()[0];
  EXPECT_NEAR(result.loss.to_floats()[0], expected_loss, 1e-5 * std::fabs(expected_loss));
  tape.backward(result.loss);
  int checked = 0;
  for (const auto& [name, param] : model_->named_parameters()) {
    Tensor grad = param.grad();
    ASSERT_TRUE(grad.defined()) << name << " got no gradient";
    EXPECT_EQ(grad.device(), Device::cuda) << name;
    EXPECT_LE(max_relative_error(grad, reference_.get("grad." + name)), 1e-4) << name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(loaded_.parameters.size()));
}

TEST_F(CudaReferenceModel, FiveAdamStepsMatchPyTorch) {
  std::vector<float> expected = reference_.get("adam_losses").to_floats();
  ASSERT_EQ(expected.size(), 6u);
  NoamSchedule schedule{loaded_.config.d_model, std::stoll(reference_.metadata.at("warmup")), 1.0};
  Adam adam(model_->parameters());
  for (int64_t step = 1; step <= 6; ++step) {
    Tape tape;
    ops::CrossEntropyResult result;
    {
      TapeScope scope(tape);
      auto ctx = nn::ForwardContext::training(1);
      result = model_->loss(batch_, ctx);
    }
    const float loss = result.loss.to_floats()[0];
    EXPECT_NEAR(loss, expected[step - 1], 1e-4 * std::fabs(expected[step - 1])) << step;
    if (step == 6) break;
    tape.backward(result.loss);
    adam.step(schedule.learning_rate(step));
    adam.zero_grad();
  }
}

// One update of a TrainingSession with dropout on each device from the same initial weights: the
// same loss, gradient norm and new weights (dropout masks are a function of seed and position).
TEST(CudaTrainingSession, AnUpdateMatchesTheCpus) {
  TFM_REQUIRE_CUDA();
  const LoadedModel loaded = load_model_dir(kFixture);
  const SafeTensors reference = read_safetensors(kFixture + "/reference.safetensors");
  ModelConfig config = loaded.config;
  config.dropout = 0.1;
  const nn::Batch batch = nn::Batch::from_ids(reference.get("src"), reference.get("tgt_in"),
                                              reference.get("tgt_out"), config.pad_id);
  UpdateResult results[2];
  nn::NamedTensors weights[2];
  for (Device device : {Device::cpu, Device::cuda}) {
    SessionOptions options;
    options.seed = 5;
    options.device = device;
    options.clip_norm = 1.0;
    TrainingSession session(config, options);
    const int i = device == Device::cpu ? 0 : 1;
    results[i] = session.update({batch, batch});
    for (const auto& [name, t] : session.model().named_parameters())
      weights[i].emplace_back(name, t.to(Device::cpu));
  }
  EXPECT_FALSE(results[1].skipped);
  EXPECT_NEAR(results[1].loss, results[0].loss, 1e-5 * std::fabs(results[0].loss));
  EXPECT_NEAR(results[1].grad_norm, results[0].grad_norm, 1e-4 * results[0].grad_norm);
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t p = 0; p < weights[0].size(); ++p)
    EXPECT_LE(max_relative_error(weights[1][p].second, weights[0][p].second), 1e-5)
        << weights[0][p].first;
}

// Greedy and beam search on the GPU give the CPU's translations.
TEST(CudaTranslate, GivesTheCpusTranslations) {
  TFM_REQUIRE_CUDA();
  const ModelConfig config = testing::tiny_decoder_config();
  nn::Transformer model(config);
  model.init(21);
  const auto sources =
      testing::random_sources({3, 9, 1, 5, 5, 2, 7}, static_cast<int32_t>(config.vocab_size), 22);
  for (DType precision : {DType::f32, DType::bf16}) {
    const decode::InferenceModel cpu(model, {precision, Device::cpu});
    const decode::InferenceModel gpu(model, {precision, Device::cuda});
    for (int64_t beam : {1, 4}) {
      decode::TranslateOptions options;
      options.beam_size = beam;
      options.n_best = beam;
      options.batch_size = 3;
      const auto expected = decode::translate(cpu, sources, options);
      const auto actual = decode::translate(gpu, sources, options);
      ASSERT_EQ(actual.size(), expected.size());
      for (size_t s = 0; s < expected.size(); ++s) {
        ASSERT_EQ(actual[s].size(), expected[s].size());
        for (size_t h = 0; h < expected[s].size(); ++h) {
          EXPECT_EQ(actual[s][h].tokens, expected[s][h].tokens)
              << dtype_name(precision) << " beam " << beam << " sentence " << s;
          // bf16 products round differently on the two devices (f32 sums in another order).
          EXPECT_NEAR(actual[s][h].log_prob, expected[s][h].log_prob,
                      precision == DType::f32 ? 1e-4 : 2e-2);
        }
      }
    }
  }
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A model directory saved from GPU weights is the one saved from the same weights on the CPU.
TEST(CudaModelDir, IsTheSameWhicheverDeviceHeldTheWeights) {
  TFM_REQUIRE_CUDA();
  const LoadedModel loaded = load_model_dir(kFixture);
  testing::TempDir dir;
  save_model_dir(dir.path() / "cpu", loaded.config, loaded.parameters);
  save_model_dir(dir.path() / "cuda", loaded.config, on_device(loaded.parameters, Device::cuda));
  for (const char* file : {"config.json", "model.safetensors"}) {
    const std::string a = file_bytes(dir.path() / "cpu" / file);
    EXPECT_FALSE(a.empty()) << file;
    EXPECT_EQ(a, file_bytes(dir.path() / "cuda" / file)) << file;
  }
}

}  // namespace
}  // namespace tfm::internal
