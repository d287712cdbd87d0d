// decode::attention_maps, the weights that tfm attention draws and alignments read: equal to the
// PyTorch reference's (tests/fixtures/tiny/attention.safetensors, tools/make_attention_fixture.py),
// to the full (non-incremental) forward pass's, and to what a translation's attention probe keeps;
// rows sum to 1, no weight on padding or on future positions; bad input is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "build_paths.h"
#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/decode/attention_maps.h"
#include "tfm/decode/translate.h"
#include "tfm/io/safetensors.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/context.h"

namespace tfm::internal {
namespace {

const std::string kFixture = std::string(tfm_source_dir()) + "/tests/fixtures/tiny";

std::shared_ptr<const decode::InferenceModel> fixture_model() {
  LoadedModel loaded = load_model_dir(kFixture);
  nn::Transformer model(loaded.config);
  model.load(loaded.parameters);
  return std::make_shared<const decode::InferenceModel>(std::move(model),
                                                        decode::InferenceOptions{});
}

std::vector<int32_t> ids_of(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return {p, p + t.numel()};
}

// Layer l of a [layers, heads, Q, K] tensor, as [heads, Q, K] values.
std::vector<float> layer_of(const Tensor& maps, int64_t l) {
  const int64_t per_layer = maps.numel() / maps.dim(0);
  const float* p = maps.data<float>() + l * per_layer;
  return {p, p + per_layer};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  return diff;
}

TEST(AttentionMaps, EqualThePyTorchReference) {
  const auto model = fixture_model();
  const SafeTensors reference = read_safetensors(kFixture + "/attention.safetensors");
  for (const std::string pair : {"pair0", "pair1"}) {
    const auto source = ids_of(reference.get(pair + ".source"));
    const auto target = ids_of(reference.get(pair + ".target"));
    const decode::AttentionMaps maps = decode::attention_maps(*model, source, target);
    ASSERT_EQ(maps.encoder_layers, 2);
    ASSERT_EQ(maps.decoder_layers, 2);
    ASSERT_EQ(maps.heads, 4);
    ASSERT_EQ(maps.source_length, static_cast<int64_t>(source.size()));
    ASSERT_EQ(maps.target_length, static_cast<int64_t>(target.size()) + 1);
    for (int64_t l = 0; l < maps.encoder_layers; ++l) {
      const std::string layer = std::to_string(l);
      for (const auto& [kind, mine] :
           {std::pair{"encoder", &maps.encoder}, std::pair{"decoder", &maps.decoder},
            std::pair{"cross", &maps.cross}}) {
        const Tensor& theirs = reference.get(pair + "." + kind + "." + layer);
        const std::vector<float> expected = theirs.to_floats();
        EXPECT_GT(*std::max_element(expected.begin(), expected.end()), 0.2f);
        EXPECT_LE(max_abs_diff(layer_of(*mine, l), expected), 1e-6)
            << pair << " " << kind << " layer " << l;
      }
    }
  }
}

TEST(AttentionMaps, RowsSumToOneWithNoWeightOnTheFuture) {
  const auto model = fixture_model();
  const decode::AttentionMaps maps = decode::attention_maps(*model, {5, 9, 14, 22}, {7, 8, 30});
  auto check_rows = [](const Tensor& t, bool causal, const char* kind) {
    const int64_t rows = t.numel() / t.dim(3), keys = t.dim(3), queries = t.dim(2);
    const float* p = t.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t q = r % queries;
      double sum = 0;
      for (int64_t k = 0; k < keys; ++k) {
        const float w = p[r * keys + k];
        if (causal && k > q) {
          EXPECT_EQ(w, 0.0f) << kind << " row " << r << " attends to the future key " << k;
        } else {
          EXPECT_GT(w, 0.0f) << kind << " row " << r << " key " << k;
        }
        sum += w;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6) << kind << " row " << r;
    }
  };
  check_rows(maps.encoder, false, "encoder");
  check_rows(maps.decoder, true, "decoder");
  check_rows(maps.cross, false, "cross");
}

// The incremental decoder's weights (one step at a time, a key/value cache) equal those of the
// training forward pass over a padded batch (ForwardContext::record_attention), with as many
// decoder layers as encoder layers and with a deep encoder over a shallow decoder.
class AttentionMapsDepths : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(AttentionMapsDepths, EqualTheFullForwardPassOverAPaddedBatch) {
  ModelConfig config = testing::tiny_decoder_config();
  config.layers = GetParam().first;
  if (GetParam().second != GetParam().first) config.decoder_layers = GetParam().second;
  validate(config);
  nn::Transformer transformer(config);
  transformer.init(11);
  const decode::InferenceModel model(transformer, decode::InferenceOptions{});
  const std::vector<std::vector<int32_t>> sources{{4, 9, 17, 5, 6}, {12, 8}};
  const std::vector<std::vector<int32_t>> targets{{7, 7, 19}, {21, 5, 6, 9, 10, 4}};
  const int64_t width = 5, length = 7;
  std::vector<int32_t> src(2 * width, config.pad_id), tgt(2 * length, config.pad_id);
  for (size_t i = 0; i < 2; ++i) {
    std::copy(sources[i].begin(), sources[i].end(), src.begin() + static_cast<int64_t>(i) * width);
    tgt[i * length] = config.bos_id;
    std::copy(targets[i].begin(), targets[i].end(),
              tgt.begin() + static_cast<int64_t>(i) * length + 1);
  }
  auto ctx = nn::ForwardContext::inference();
  std::vector<Tensor> recorded;
  ctx.record_attention(&recorded);
  const std::vector<int32_t> lengths{5, 2};
  const Tensor memory = transformer.encode(Tensor::from_ints({2, width}, src), lengths, ctx);
  transformer.decode(Tensor::from_ints({2, length}, tgt), memory, lengths, ctx);
  const auto L = config.layers, D = config.decoder_depth(), H = config.heads;
  ASSERT_EQ(static_cast<int64_t>(recorded.size()), L + 2 * D);  // encoder; decoder self, cross

  for (int64_t b = 0; b < 2; ++b) {
    const auto& s = sources[static_cast<size_t>(b)];
    const decode::AttentionMaps maps =
        decode::attention_maps(model, s, targets[static_cast<size_t>(b)]);
    const int64_t S = maps.source_length, T = maps.target_length;
    ASSERT_EQ(maps.encoder_layers, L);
    ASSERT_EQ(maps.decoder_layers, D);
    ASSERT_EQ(maps.decoder.dim(0), D);
    // Entry (l, h, q, k) of sentence b in a recorded [2, h, Tq, Tk] against maps' [l, h, q, k].
    auto compare = [&](const Tensor& full, const Tensor& mine, int64_t l, int64_t q_count,
                       int64_t k_count, const char* kind) {
      const int64_t Tq = full.dim(2), Tk = full.dim(3);
      const float* f = full.data<float>();
      const float* m = mine.data<float>();
      double diff = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t q = 0; q < q_count; ++q) {
          for (int64_t k = 0; k < Tk; ++k) {
            const float w = f[((b * H + h) * Tq + q) * Tk + k];
            if (k >= k_count) {
              EXPECT_EQ(w, 0.0f) << kind << ": weight on padding";
              continue;
            }
            diff = std::max(diff, std::fabs(static_cast<double>(w) -
                                            m[((l * H + h) * q_count + q) * k_count + k]));
          }
        }
      EXPECT_LE(diff, 1e-5) << kind << " layer " << l << " sentence " << b;
    };
    for (int64_t l = 0; l < L; ++l)
      compare(recorded[static_cast<size_t>(l)], maps.encoder, l, S, S, "encoder");
    for (int64_t l = 0; l < D; ++l) {
      compare(recorded[static_cast<size_t>(L + 2 * l)], maps.decoder, l, T, T, "decoder");
      compare(recorded[static_cast<size_t>(L + 2 * l + 1)], maps.cross, l, T, S, "cross");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EncoderAndDecoderLayers, AttentionMapsDepths,
                         ::testing::Values(std::pair<int64_t, int64_t>{2, 2},
                                           std::pair<int64_t, int64_t>{3, 1}));

// A translation's attention probe (the mean over layers and heads, what alignments read) keeps the
// weights attention_maps gives for the translation it found.
TEST(AttentionMaps, AgreeWithTheTranslationsAttentionProbe) {
  ModelConfig config = testing::tiny_decoder_config();
  nn::Transformer transformer(config);
  transformer.init(5);
  const decode::InferenceModel model(transformer, decode::InferenceOptions{});
  const std::vector<int32_t> source{9, 4, 13, 22, 6, 8};
  decode::TranslateOptions options;
  options.beam_size = 3;
  options.max_length = 8;
  options.attention = {decode::AttentionProbe::kAllLayers, -1};
  const auto best = decode::translate(model, {source}, options)[0][0];
  ASSERT_FALSE(best.tokens.empty());
  const decode::AttentionMaps maps = decode::attention_maps(model, source, best.tokens);
  ASSERT_EQ(best.attention.size(), static_cast<size_t>(best.length));
  const int64_t S = maps.source_length, T = maps.target_length, H = maps.heads;
  for (size_t t = 0; t < best.attention.size(); ++t) {
    ASSERT_EQ(best.attention[t].size(), static_cast<size_t>(S));
    for (int64_t k = 0; k < S; ++k) {
      double mean = 0;
      for (int64_t l = 0; l < maps.decoder_layers; ++l)
        for (int64_t h = 0; h < H; ++h)
          mean += maps.cross.data<float>()[((l * H + h) * T + static_cast<int64_t>(t)) * S + k];
      mean /= static_cast<double>(maps.decoder_layers * H);
      EXPECT_NEAR(best.attention[t][static_cast<size_t>(k)], mean, 1e-5) << "token " << t;
    }
  }
}

TEST(AttentionMaps, BadInputIsAClearError) {
  const auto model = fixture_model();
  testing::expect_error([&] { decode::attention_maps(*model, {}, {5}); },
                        {"the source sentence is empty"});
  testing::expect_error([&] { decode::attention_maps(*model, std::vector<int32_t>(65, 5), {5}); },
                        {"65 tokens", "maximum input length 64"});
  testing::expect_error(
      [&] {
        decode::attention_maps(*model, {5, 60}, {5});
      },
      {"source token 1 is id 60", "vocabulary of 60"});
  testing::expect_error([&] { decode::attention_maps(*model, {5}, {-1}); },
                        {"target token 0 is id -1"});
}

// An overflowing model's weights are NaN: `tfm attention --target` wrote a page of nulls. It is an
// error naming the encoder layer (the first to overflow).
TEST(AttentionMaps, AnOverflowingModelIsAnErrorNamingTheLayer) {
  const LoadedModel loaded = load_model_dir(kFixture);
  nn::Transformer model(loaded.config);
  model.load(loaded.parameters);  // a copy: the file's mapping is not written
  for (const Tensor& p : model.parameters()) {
    float* x = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) x[i] *= 1e30f;
  }
  const decode::InferenceModel inference(std::move(model), decode::InferenceOptions{});
  testing::expect_error(
      [&] {
        decode::attention_maps(inference, {5, 6, 7}, {8, 9});
      },
      {"attention: encoder layer 0 self-attention: the weights are not finite", "overflow"});
}

}  // namespace
}  // namespace tfm::internal
