// bf16 decoding (InferenceOptions::precision): the step's log-probabilities of a bf16 inference
// model against f32 on the same prefixes, whole translations against f32, and a model loaded and
// packed once against one packed per call.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/decode/translate.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"

namespace tfm::internal::decode {
namespace {

using testing::random_sources;
using testing::tiny_decoder_config;

ModelConfig small_config() {
  ModelConfig c = tiny_decoder_config();
  c.d_model = 64;
  c.d_ff = 128;
  c.heads = 4;
  c.d_k = 16;
  c.d_v = 16;
  c.vocab_size = 300;
  return c;
}

struct Encoded {
  Tensor memory;
  std::vector<int32_t> lengths;
};

Encoded encode(const nn::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
               DType precision = DType::f32) {
  int64_t width = 0;
  for (const auto& s : sources) width = std::max<int64_t>(width, static_cast<int64_t>(s.size()));
  std::vector<int32_t> ids;
  Encoded e;
  for (const auto& s : sources) {
    for (int64_t t = 0; t < width; ++t)
      ids.push_back(t < static_cast<int64_t>(s.size()) ? s[static_cast<size_t>(t)]
                                                       : model.config().pad_id);
    e.lengths.push_back(static_cast<int32_t>(s.size()));
  }
  auto ctx = nn::ForwardContext::inference(precision);
  e.memory = model.encode(Tensor::from_ints({static_cast<int64_t>(sources.size()), width}, ids),
                          e.lengths, ctx);
  return e;
}

// Forced decoding of the same random prefixes with f32 and with bf16 products (encoder included):
// every step's log-probabilities stay close, and bf16 does change them.
TEST(Bf16Decoding, StepLogProbsStayCloseToF32) {
  ModelConfig config = small_config();
  nn::Transformer model(config);
  model.init(51);
  auto sources = random_sources({7, 3, 9, 5}, static_cast<int32_t>(config.vocab_size), 52);
  const int64_t beam = 2;
  Encoded f32 = encode(model, sources);
  TransformerScorer f32_scorer(model, f32.memory, f32.lengths, beam, 10);
  const InferenceModel bf16_model(model, {DType::bf16, Device::cpu});
  Encoded bf16 = encode(bf16_model.transformer(), sources, DType::bf16);
  TransformerScorer bf16_scorer(bf16_model, bf16.memory, bf16.lengths, beam, 10);
  std::mt19937_64 rng(53);
  std::uniform_int_distribution<int32_t> word(4, static_cast<int32_t>(config.vocab_size) - 1);
  std::vector<int32_t> last(sources.size() * beam, config.bos_id);
  double worst = 0.0;
  for (int step = 0; step < 10; ++step) {
    std::vector<float> want = f32_scorer.step(last).to_floats();
    std::vector<float> got = bf16_scorer.step(last).to_floats();
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    // Random next tokens, the two beams of every sentence swapped.
    for (auto& t : last) t = word(rng);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < static_cast<int64_t>(last.size()); ++r) rows.push_back(r ^ 1);
    f32_scorer.select(rows);
    bf16_scorer.select(rows);
  }
  // Every product rounds its operands to 8 significant bits (relative error <= 2^-9 each); through
  // the encoder and 2 decoder layers the log-probabilities, a few units in size, move by a few
  // hundredths at most (seen: 0.028).
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(worst, 1e-4);  // bf16 really changed the products
}

// Whole translations: bf16 gives the same output for most sentences (random weights have near-ties,
// where rounding may pick another token), and sentences with the same output have close scores
// (relative change, since a score sums a log-probability of several units per token).
TEST(Bf16Decoding, TranslationsAgreeWithF32) {
  ModelConfig config = small_config();
  nn::Transformer model(config);
  model.init(54);
  std::vector<int> lengths;
  for (int i = 0; i < 24; ++i) lengths.push_back(3 + i % 9);
  auto sources = random_sources(lengths, static_cast<int32_t>(config.vocab_size), 55);
  for (int64_t beam : {1, 4}) {
    SCOPED_TRACE("beam " + std::to_string(beam));
    TranslateOptions options;
    options.beam_size = beam;
    options.max_length_offset = 6;
    options.batch_size = 8;
    auto want = translate(model, sources, options);
    auto got = translate(model, sources, options, DType::bf16);
    const auto [same, tokens, same_tokens, score_change] = testing::agreement(got, want);
    // (Seen: 23 and 24 of 24 sentences, 98% and 100% of the tokens, scores within 0.4%.)
    EXPECT_GE(same, 20) << "of 24 sentences";
    EXPECT_GE(same_tokens, tokens * 9 / 10) << "of " << tokens << " tokens";
    // bf16 keeps 8 significant bits (a relative rounding of at most 2^-9 = 0.2% per operand); a
    // score, a sum of log-probabilities, moves by a small multiple of that.
    EXPECT_LT(score_change, 0.01) << "largest relative change of a score";
    EXPECT_GT(score_change, 0.0);
  }
}

// A model loaded from its directory and packed once translates, call after call, exactly as a
// model packed for one call; in f32 and in bf16.
TEST(Bf16Decoding, AModelLoadedOnceTranslatesAsOnePackedPerCall) {
  ModelConfig config = small_config();
  nn::Transformer model(config);
  model.init(56);
  testing::TempDir dir;
  save_model_dir(dir.path(), config, model.named_parameters());
  auto sources = random_sources({4, 7, 2}, static_cast<int32_t>(config.vocab_size), 57);
  TranslateOptions options;
  options.max_length_offset = 4;
  for (DType precision : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(precision));
    auto per_call = translate(model, sources, options, precision);
    const auto loaded = load_inference_model(dir.path(), {precision, Device::cpu});
    EXPECT_EQ(loaded->precision(), precision);
    EXPECT_EQ(loaded->config(), config);
    for (int call = 0; call < 2; ++call) {
      auto got = translate(*loaded, sources, options);
      for (size_t s = 0; s < sources.size(); ++s) {
        EXPECT_EQ(got[s][0].tokens, per_call[s][0].tokens);
        EXPECT_EQ(got[s][0].score, per_call[s][0].score);
      }
    }
  }
}

TEST(Bf16Decoding, RejectsOtherPrecisions) {
  ModelConfig config = tiny_decoder_config();
  nn::Transformer model(config);
  testing::expect_error(
      [&] {
        translate(model, {{5, 6}}, TranslateOptions{}, DType::i32);
      },
      {"inference model", "precision i32 is not supported"});
  // Without a usable GPU (a build without CUDA, or no device), a cuda model says why.
  const std::string why = ops::device_unavailable_reason(Device::cuda);
  if (!why.empty())
    testing::expect_error([&] { InferenceModel(model, {DType::f32, Device::cuda}); }, {why});
  EXPECT_EQ(ops::parse_precision("bf16"), DType::bf16);
  EXPECT_EQ(ops::parse_precision("f32"), DType::f32);
  EXPECT_EQ(ops::parse_precision("auto"), ops::native_bf16_products() ? DType::bf16 : DType::f32);
  testing::expect_error([&] { ops::parse_precision("fp16", "--precision"); },
                        {"--precision", "'fp16' is not a precision (f32, bf16 or auto)"});
}

}  // namespace
}  // namespace tfm::internal::decode
