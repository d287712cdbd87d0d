// Incremental decoding with the key/value cache (nn::DecoderState, Transformer::decode_step)
// against a full recompute of every prefix with Transformer::forward, while beams are reordered,
// sentences leave the batch and the caches outgrow their capacity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/autograd/tape.h"
#include "tfm/decode/transformer_scorer.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal {
namespace {

using testing::random_sources;
using testing::tiny_decoder_config;

// Right-pads the sentences to `width` with pad_id: [rows, width].
Tensor padded(const std::vector<std::vector<int32_t>>& rows, int64_t width, int32_t pad) {
  std::vector<int32_t> ids;
  for (const auto& row : rows)
    for (int64_t t = 0; t < width; ++t)
      ids.push_back(t < static_cast<int64_t>(row.size()) ? row[static_cast<size_t>(t)] : pad);
  return Tensor::from_ints({static_cast<int64_t>(rows.size()), width}, ids);
}

// log softmax of the last position's logits of every row, recomputed from scratch: forward() on
// (source of the row, the row's whole prefix), in double.
std::vector<std::vector<double>> recomputed_log_probs(
    const nn::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
    const std::vector<std::vector<int32_t>>& prefixes, int64_t source_width) {
  const ModelConfig& c = model.config();
  // tgt_out only has to be a valid batch; its values are not used by forward().
  Tensor src = padded(sources, source_width, c.pad_id);
  Tensor tgt_in = padded(prefixes, static_cast<int64_t>(prefixes[0].size()), c.pad_id);
  Tensor tgt_out = tgt_in.clone();
  nn::Batch batch = nn::Batch::from_ids(src, tgt_in, tgt_out, c.pad_id);
  auto ctx = nn::ForwardContext::inference();
  Tensor logits = model.forward(batch, ctx);
  const int64_t rows = logits.dim(0), steps = logits.dim(1), vocab = logits.dim(2);
  std::vector<float> all = logits.to_floats();
  std::vector<std::vector<double>> out;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = all.data() + (r * steps + steps - 1) * vocab;
    double max = z[0], sum = 0.0;
    for (int64_t j = 1; j < vocab; ++j) max = std::max(max, static_cast<double>(z[j]));
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(z[j] - max);
    std::vector<double> row;
    for (int64_t j = 0; j < vocab; ++j) row.push_back(z[j] - max - std::log(sum));
    out.push_back(row);
  }
  return out;
}

// Decodes random tokens for several steps with beam 2: at every step the cached step's log-probs
// must equal the recomputed ones. Beams are shuffled within their sentence at every step, a
// sentence leaves the batch at step 4, and the caches start with room for 3 positions only.
void check_incremental_equals_recompute(const ModelConfig& config, uint64_t seed) {
  SCOPED_TRACE("norm " + config.norm + ", positional " + config.positional + ", bias " +
               std::to_string(config.attention_bias) + ", layers " + std::to_string(config.layers) +
               "+" + std::to_string(config.decoder_depth()));
  nn::Transformer model(config);
  model.init(seed);
  const int64_t beam = 2, steps = 9;
  auto sources = random_sources({5, 2, 4}, static_cast<int32_t>(config.vocab_size), seed + 1);
  const int64_t width = 6;  // one more than the longest: padding must not matter
  std::vector<int32_t> lengths{5, 2, 4};
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(padded(sources, width, config.pad_id), lengths, ctx);
  nn::DecoderState state = model.start_decoding(memory, lengths, beam, /*capacity=*/3);

  // Per decoder row: its source index (into `sources`) and its prefix, bos first.
  std::vector<int64_t> row_source;
  std::vector<std::vector<int32_t>> prefix;
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t i = 0; i < beam; ++i) {
      row_source.push_back(s);
      prefix.push_back({config.bos_id});
    }
  std::mt19937_64 rng(seed + 2);
  std::uniform_int_distribution<int32_t> token(1, static_cast<int32_t>(config.vocab_size) - 1);
  double worst = 0.0;
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int32_t> last;
    for (const auto& p : prefix) last.push_back(p.back());
    Tensor logits = model.decode_step(Tensor::from_ints({state.rows()}, last), state);
    ASSERT_EQ(state.length(), step + 1);
    logits = ops::log_softmax(logits);
    std::vector<float> cached = logits.to_floats();

    std::vector<std::vector<int32_t>> row_sources;
    for (int64_t s : row_source) row_sources.push_back(sources[static_cast<size_t>(s)]);
    auto expected = recomputed_log_probs(model, row_sources, prefix, width);
    for (size_t r = 0; r < expected.size(); ++r)
      for (size_t j = 0; j < expected[r].size(); ++j) {
        double diff = std::fabs(cached[r * expected[r].size() + j] - expected[r][j]);
        worst = std::max(worst, diff);
        ASSERT_LT(diff, 1e-5) << "step " << step << ", row " << r << ", token " << j;
      }

    // Next: a random token per row, then rows reordered within their sentence (some repeated),
    // and at step 4 the second sentence leaves.
    for (auto& p : prefix) p.push_back(token(rng));
    std::vector<int64_t> keep;
    const int64_t groups = state.sources();
    for (int64_t g = 0; g < groups; ++g) {
      if (step == 4 && g == 1) continue;
      for (int64_t i = 0; i < beam; ++i)
        keep.push_back(g * beam + static_cast<int64_t>(rng() % static_cast<uint64_t>(beam)));
    }
    state.select(keep);
    std::vector<int64_t> next_source;
    std::vector<std::vector<int32_t>> next_prefix;
    for (int64_t r : keep) {
      next_source.push_back(row_source[static_cast<size_t>(r)]);
      next_prefix.push_back(prefix[static_cast<size_t>(r)]);
    }
    row_source = next_source;
    prefix = next_prefix;
  }
  EXPECT_EQ(state.sources(), 2);
  EXPECT_GT(state.layers[0].self.capacity(), 3);  // grew
  EXPECT_GT(worst, 0.0);                          // the comparison saw real numbers
}

TEST(IncrementalDecoding, EqualsFullRecomputePostNorm) {
  check_incremental_equals_recompute(tiny_decoder_config("post"), 11);
}

TEST(IncrementalDecoding, EqualsFullRecomputePreNorm) {
  check_incremental_equals_recompute(tiny_decoder_config("pre"), 12);
}

TEST(IncrementalDecoding, EqualsFullRecomputeLearnedPositions) {
  check_incremental_equals_recompute(tiny_decoder_config("post", "learned"), 13);
}

TEST(IncrementalDecoding, EqualsFullRecomputeWithAttentionBiases) {
  check_incremental_equals_recompute(tiny_decoder_config("pre", "sinusoidal", true), 14);
}

TEST(IncrementalDecoding, EqualsFullRecomputeWithOtherDecoderDepths) {
  for (const auto& [encoder, decoder] : {std::pair{3, 1}, std::pair{1, 3}}) {
    ModelConfig config = tiny_decoder_config("pre");
    config.layers = encoder;
    config.decoder_layers = decoder;
    validate(config);
    check_incremental_equals_recompute(config, 15);
  }
}

// A model builds its sinusoid table only up to kBuiltPositions rows (max_positions may be 65536):
// positions past it are computed when a sequence reaches them, as the same values.
TEST(IncrementalDecoding, PositionsPastTheBuiltSinusoidTableEqualTheFullTable) {
  const int64_t built = 1024;  // nn::Transformer's kBuiltPositions
  const Tensor full = nn::sinusoidal_positions(built + 8, 16);
  const Tensor rows = nn::sinusoidal_positions(5, 16, built - 2);
  ASSERT_EQ(rows.shape(), (Shape{5, 16}));
  EXPECT_EQ(std::memcmp(rows.raw(), full.data<float>() + (built - 2) * 16, 5 * 16 * sizeof(float)),
            0);

  ModelConfig config = tiny_decoder_config("post");
  config.max_positions = 65536;
  nn::Transformer model(config);
  model.init(21);
  const std::vector<std::vector<int32_t>> sources = {{5, 6, 7}};
  const std::vector<int32_t> lengths{3};
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(padded(sources, 3, config.pad_id), lengths, ctx);
  nn::DecoderState state = model.start_decoding(memory, lengths, 1, /*capacity=*/8);
  std::vector<int32_t> prefix{config.bos_id};
  std::mt19937_64 rng(22);
  for (int64_t step = 0; step < built + 3; ++step) {
    Tensor logits = model.decode_step(Tensor::from_ints({1}, {prefix.back()}), state);
    if (step >= built - 1) {  // the last built row, then rows past the table
      const std::vector<float> cached = ops::log_softmax(logits).to_floats();
      const auto expected = recomputed_log_probs(model, sources, {prefix}, 3);
      for (size_t j = 0; j < cached.size(); ++j)
        ASSERT_NEAR(cached[j], expected[0][j], 1e-5) << "step " << step << ", token " << j;
    }
    prefix.push_back(static_cast<int32_t>(4 + rng() % 30));
  }
}

// The strided-K/V kernel against ops::attention on a dense copy of the used keys: several queries,
// padding and causal masks, NaN in the unused cache positions (which must never be read).
TEST(IncrementalDecoding, AttentionCachedEqualsAttentionOnTheUsedKeys) {
  const int64_t batch = 3, tq = 2, capacity = 7, keys = 5, heads = 2, dk = 4, dv = 3;
  std::mt19937_64 rng(31);
  std::normal_distribution<float> normal;
  auto random = [&](const Shape& shape) {
    Tensor t = Tensor::empty(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
    return t;
  };
  Tensor q = random({batch, tq, heads * dk});
  Tensor k_cache = Tensor::full({batch, capacity, heads * dk}, std::nanf(""));
  Tensor v_cache = Tensor::full({batch, capacity, heads * dv}, std::nanf(""));
  Tensor k = random({batch, keys, heads * dk}), v = random({batch, keys, heads * dv});
  for (int64_t b = 0; b < batch; ++b) {
    std::copy_n(k.data<float>() + b * keys * heads * dk, keys * heads * dk,
                k_cache.data<float>() + b * capacity * heads * dk);
    std::copy_n(v.data<float>() + b * keys * heads * dv, keys * heads * dv,
                v_cache.data<float>() + b * capacity * heads * dv);
  }
  std::vector<ops::AttentionMask> masks(3);
  masks[1].key_lengths = {5, 2, 4};
  masks[2].causal = true;
  masks[2].query_offset = 3;
  for (const auto& mask : masks) {
    Tensor probs_cached, probs;
    std::vector<float> got =
        ops::attention_cached(q, k_cache, v_cache, keys, heads, mask, &probs_cached).to_floats();
    std::vector<float> want = ops::attention(q, k, v, heads, mask, 0.0f, 0, &probs).to_floats();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
    std::vector<float> pc = probs_cached.to_floats(), p = probs.to_floats();
    ASSERT_EQ(pc.size(), p.size());
    for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(pc[i], p[i], 1e-6f) << i;
  }
  testing::expect_error([&] { ops::attention_cached(q, k_cache, v_cache, 8, heads, masks[0]); },
                        {"8 keys", "7 positions"});
}

TEST(IncrementalDecoding, CrossAttentionWeightsCoverTheSourceOnly) {
  ModelConfig config = tiny_decoder_config();
  nn::Transformer model(config);
  model.init(5);
  auto sources = random_sources({4, 2}, static_cast<int32_t>(config.vocab_size), 6);
  std::vector<int32_t> lengths{4, 2};
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(padded(sources, 4, config.pad_id), lengths, ctx);
  nn::DecoderState state = model.start_decoding(memory, lengths, 3, 8);
  nn::StepAttention step;
  step.want_cross = true;
  std::vector<int32_t> bos(6, config.bos_id);
  model.decode_step(Tensor::from_ints({6}, bos), state, &step);
  ASSERT_EQ(step.cross.size(), static_cast<size_t>(config.layers));
  ASSERT_TRUE(step.self.empty());
  const Tensor& weights = step.cross[1];
  // Asked for one layer, a step keeps that layer's weights alone (the same as among all).
  nn::DecoderState again = model.start_decoding(memory, lengths, 3, 8);
  nn::StepAttention one;
  one.want_cross = true;
  one.layer = 1;
  model.decode_step(Tensor::from_ints({6}, bos), again, &one);
  ASSERT_EQ(one.cross.size(), 1u);
  EXPECT_EQ(one.cross[0].to_floats(), weights.to_floats());
  ASSERT_EQ(weights.shape(), Shape({6, config.heads, 4}));
  std::vector<float> w = weights.to_floats();
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t h = 0; h < config.heads; ++h) {
      const float* p = w.data() + (r * config.heads + h) * 4;
      const int64_t visible = lengths[static_cast<size_t>(r / 3)];
      float sum = 0;
      for (int64_t j = 0; j < 4; ++j) {
        if (j >= visible) {
          EXPECT_EQ(p[j], 0.0f) << "row " << r << " attends to padding";
        }
        EXPECT_GE(p[j], 0.0f);
        sum += p[j];
      }
      EXPECT_NEAR(sum, 1.0f, 1e-6f);
      EXPECT_GT(p[0], 0.0f);
    }
}

TEST(IncrementalDecoding, RefusesToRunUnderARecordingTape) {
  ModelConfig config = tiny_decoder_config();
  nn::Transformer model(config);
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(Tensor::from_ints({1, 2}, {5, 6}), {2}, ctx);
  nn::DecoderState state = model.start_decoding(memory, {2}, 1, 4);
  Tape tape;
  TapeScope scope(tape);
  testing::expect_error([&] { model.decode_step(Tensor::from_ints({1}, {config.bos_id}), state); },
                        {"attention_cached", "inference only"});
}

TEST(IncrementalDecoding, SelectRejectsRowsThatMixSources) {
  ModelConfig config = tiny_decoder_config();
  nn::Transformer model(config);
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(Tensor::from_ints({2, 2}, {5, 6, 7, 8}), {2, 2}, ctx);
  nn::DecoderState state = model.start_decoding(memory, {2, 2}, 2, 4);
  testing::expect_error([&] { state.select({0, 2}); }, {"mix sources 0 and 1"});
  testing::expect_error([&] { state.select({0}); }, {"not a multiple of the beam 2"});
  testing::expect_error([&] { state.select({0, 4}); }, {"row 4 selected from 4 rows"});
  state.select({3, 2});  // one source left, its beams swapped
  EXPECT_EQ(state.sources(), 1);
  EXPECT_EQ(state.source_lengths, std::vector<int32_t>{2});
}

}  // namespace
}  // namespace tfm::internal
