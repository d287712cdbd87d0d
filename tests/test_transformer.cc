// Model-level behaviour: parameter layout, masking, causality, reproducible dropout, and no
// allocation in a training step's steady state. (Numerical agreement with PyTorch:
// test_reference_model.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "temp_dir.h"
#include "tfm/autograd/tape.h"
#include "tfm/core/allocator.h"
#include "tfm/model/parameters.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"

namespace tfm::internal {
namespace {

using testing::expect_error;

ModelConfig tiny_config() {
  ModelConfig c = preset("base");
  c.layers = 2;
  c.d_model = 16;
  c.d_ff = 32;
  c.heads = 2;
  c.d_k = 8;
  c.d_v = 4;
  c.vocab_size = 40;
  c.max_positions = 32;
  c.dropout = 0.0;
  return c;
}

nn::Batch make_batch(const std::vector<std::vector<int32_t>>& src,
                     const std::vector<std::vector<int32_t>>& tgt, int64_t src_width,
                     int64_t tgt_width) {
  const int32_t pad = 0, bos = 2, eos = 3;
  std::vector<int32_t> s, ti, to;
  for (size_t b = 0; b < src.size(); ++b) {
    for (int64_t t = 0; t < src_width; ++t)
      s.push_back(t < static_cast<int64_t>(src[b].size()) ? src[b][t] : pad);
    std::vector<int32_t> in{bos}, out;
    in.insert(in.end(), tgt[b].begin(), tgt[b].end());
    out.insert(out.end(), tgt[b].begin(), tgt[b].end());
    out.push_back(eos);
    for (int64_t t = 0; t < tgt_width; ++t) {
      ti.push_back(t < static_cast<int64_t>(in.size()) ? in[t] : pad);
      to.push_back(t < static_cast<int64_t>(out.size()) ? out[t] : pad);
    }
  }
  auto rows = static_cast<int64_t>(src.size());
  return nn::Batch::from_ids(Tensor::from_ints({rows, src_width}, s),
                             Tensor::from_ints({rows, tgt_width}, ti),
                             Tensor::from_ints({rows, tgt_width}, to), pad);
}

const std::vector<std::vector<int32_t>> kSrc{{5, 6, 7, 8, 9}, {10, 11, 12}};
const std::vector<std::vector<int32_t>> kTgt{{13, 14, 15}, {16, 17, 18, 19, 20}};

float loss_of(const nn::Transformer& model, const nn::Batch& batch) {
  auto ctx = nn::ForwardContext::inference();
  return model.loss(batch, ctx).loss.to_floats()[0];
}

TEST(Transformer, ParametersFollowTheDocumentedSpec) {
  for (int variant = 0; variant < 9; ++variant) {
    ModelConfig c = tiny_config();
    if (variant == 1) c.norm = "pre";
    if (variant == 2) c.positional = "learned";
    if (variant == 3) c.attention_bias = true;
    if (variant == 4) c.tie_embeddings = "decoder";
    if (variant == 5) c.tie_embeddings = "none", c.output_bias = true;
    if (variant == 6) c.output_bias = true;
    if (variant == 7) c.layers = 3, c.decoder_layers = 1;
    if (variant == 8) c.decoder_layers = 4, c.norm = "pre";
    nn::Transformer model(c);
    auto params = model.named_parameters();
    auto specs = parameter_specs(c);
    ASSERT_EQ(params.size(), specs.size()) << "variant " << variant;
    for (size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(params[i].first, specs[i].name);
      EXPECT_EQ(params[i].second.shape(), specs[i].shape) << specs[i].name;
    }
  }
}

// The sinusoid layouts (docs/MODEL_FORMAT.md "Sinusoids") against their formulas in double; a
// table from row `first` holds the same rows as the whole table.
TEST(Transformer, SinusoidLayoutsFollowTheirFormulas) {
  const int64_t d = 12, half = d / 2;
  for (const std::string layout : {"interleaved", "halves", "halves_t2t"}) {
    SCOPED_TRACE(layout);
    const std::vector<float> table = nn::sinusoidal_positions(40, d, 0, layout).to_floats();
    for (int64_t pos : {0, 1, 7, 39}) {
      for (int64_t i = 0; i < half; ++i) {
        const double w = layout == "halves_t2t"
                             ? std::exp(-static_cast<double>(i) * std::log(10000.0) /
                                        static_cast<double>(half - 1))
                             : std::pow(10000.0, -2.0 * static_cast<double>(i) / d);
        const int64_t sin_column = layout == "interleaved" ? 2 * i : i;
        const int64_t cos_column = layout == "interleaved" ? 2 * i + 1 : half + i;
        EXPECT_NEAR(table[pos * d + sin_column], std::sin(pos * w), 1e-7) << pos << " " << i;
        EXPECT_NEAR(table[pos * d + cos_column], std::cos(pos * w), 1e-7) << pos << " " << i;
      }
    }
    const std::vector<float> rows = nn::sinusoidal_positions(5, d, 30, layout).to_floats();
    EXPECT_TRUE(std::equal(rows.begin(), rows.end(), table.begin() + 30 * d));
  }
  // The interleaved table is the one models had before the layouts (the default).
  EXPECT_EQ(nn::sinusoidal_positions(9, d).to_floats(),
            nn::sinusoidal_positions(9, d, 0, "interleaved").to_floats());
  expect_error([] { nn::sinusoidal_positions(2, d, 0, "spiral"); },
               {"unknown sinusoid layout 'spiral'"});
}

// position_offset shifts the rows every position reads, learned or sinusoidal: the same weights
// read at other rows compute another loss, and a learned table moved down by the offset gives the
// unshifted model's loss back.
TEST(Transformer, PositionOffsetShiftsTheRowsRead) {
  for (const std::string positional : {"sinusoidal", "learned"}) {
    SCOPED_TRACE(positional);
    ModelConfig c = tiny_config();
    c.positional = positional;
    nn::Transformer plain(c);
    plain.init(3);
    ModelConfig shifted_config = c;
    shifted_config.position_offset = 2;
    const nn::Transformer shifted(shifted_config, plain.named_parameters());
    const nn::Batch batch = make_batch(kSrc, kTgt, 5, 6);
    EXPECT_NE(loss_of(shifted, batch), loss_of(plain, batch));
    if (positional == "learned") {
      nn::NamedTensors moved = plain.named_parameters();
      for (auto& [name, tensor] : moved) {
        if (!name.ends_with("positions.weight")) continue;
        const std::vector<float> from = tensor.to_floats();
        std::vector<float> to(from.size(), 0.0f);
        const int64_t d = c.d_model, rows = tensor.dim(0);
        for (int64_t r = 2; r < rows; ++r)
          std::copy_n(from.begin() + (r - 2) * d, d, to.begin() + r * d);
        tensor = Tensor::from_floats(tensor.shape(), to);
      }
      const nn::Transformer moved_model(shifted_config, moved);
      EXPECT_NEAR(loss_of(moved_model, batch), loss_of(plain, batch), 1e-6);
    }
  }
  // Longer than max_positions less the offset: refused, naming both.
  ModelConfig c = tiny_config();
  c.positional = "learned", c.max_positions = 7, c.position_offset = 2;
  nn::Transformer model(c);
  expect_error([&] { loss_of(model, make_batch(kSrc, kTgt, 6, 6)); },
               {"sequence of 6 tokens exceeds max_positions 7 less position_offset 2"});
}

// A model built from loaded weights adopts them: every parameter shares the given tensor's storage
// (no copy, no random initialisation) and computes what the original computes; a missing or
// misshapen weight is an error naming it.
TEST(Transformer, LoadedWeightsAreAdoptedNotCopied) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelConfig c = tiny_config();
    if (variant == 1) c.norm = "pre";
    if (variant == 2) c.positional = "learned", c.attention_bias = true;
    nn::Transformer original(c);
    original.init(7);
    const nn::NamedTensors weights = original.named_parameters();
    const nn::Transformer adopted(c, weights);
    const nn::NamedTensors params = adopted.named_parameters();
    ASSERT_EQ(params.size(), weights.size());
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].first, weights[i].first);
      EXPECT_TRUE(params[i].second.same_storage(weights[i].second)) << params[i].first;
      EXPECT_TRUE(params[i].second.requires_grad()) << params[i].first;
    }
    const nn::Batch batch = make_batch(kSrc, kTgt, 5, 6);
    EXPECT_EQ(loss_of(adopted, batch), loss_of(original, batch)) << "variant " << variant;
  }
  nn::NamedTensors weights = nn::Transformer(tiny_config()).named_parameters();
  nn::NamedTensors missing(weights.begin() + 1, weights.end());
  expect_error([&] { nn::Transformer(tiny_config(), missing); },
               {"parameter 'embedding.weight' is missing"});
  weights[1].second = Tensor::zeros({3});
  expect_error([&] { nn::Transformer(tiny_config(), weights); },
               {"parameter '" + weights[1].first + "'", "f32[3]", "expected f32[16, 16]"});
}

TEST(Transformer, ExtraPaddingChangesNothing) {
  nn::Transformer model(tiny_config());
  model.init(3);
  float tight = loss_of(model, make_batch(kSrc, kTgt, 5, 6));
  float padded = loss_of(model, make_batch(kSrc, kTgt, 9, 11));
  EXPECT_GT(tight, 0.5f);
  EXPECT_NEAR(tight, padded, 1e-5f * std::fabs(tight));
}

TEST(Transformer, DecoderIsCausal) {
  nn::Transformer model(tiny_config());
  model.init(4);
  auto ctx = nn::ForwardContext::inference();
  auto changed = kTgt;
  changed[0][2] = 30;  // the 4th decoder input of sentence 0
  Tensor a = model.forward(make_batch(kSrc, kTgt, 5, 6), ctx);
  Tensor b = model.forward(make_batch(kSrc, changed, 5, 6), ctx);
  std::vector<float> va = a.to_floats(), vb = b.to_floats();
  const int64_t V = 40;
  for (int64_t t = 0; t < 6; ++t) {
    float max_diff = 0;
    for (int64_t j = 0; j < V; ++j)
      max_diff = std::max(max_diff, std::fabs(va[t * V + j] - vb[t * V + j]));
    if (t < 3)
      EXPECT_EQ(max_diff, 0.0f) << "position " << t << " saw a later token";
    else
      EXPECT_GT(max_diff, 1e-4f) << "position " << t << " ignored its input";
  }
}

TEST(Transformer, DropoutIsReproducibleFromTheSeed) {
  ModelConfig c = tiny_config();
  c.dropout = 0.3;
  c.attention_dropout = 0.1;
  nn::Transformer model(c);
  nn::Batch batch = make_batch(kSrc, kTgt, 5, 6);
  auto run = [&](uint64_t seed) {
    auto ctx = nn::ForwardContext::training(seed);
    return model.loss(batch, ctx).loss.to_floats()[0];
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
  EXPECT_NE(run(5), loss_of(model, batch));
}

TEST(Transformer, RDropAddsTheTwoPassesDivergence) {
  ModelConfig c = tiny_config();
  nn::Batch batch = make_batch(kSrc, kTgt, 5, 6);
  auto run = [&](const nn::Transformer& model, float weight) {
    auto ctx = nn::ForwardContext::training(5);
    return model.loss(batch, ctx, 0.0, weight);
  };
  {
    // Without dropout both passes are the same function: no divergence, the plain loss.
    nn::Transformer model(c);
    const ops::CrossEntropyResult plain = run(model, 0.0f), paired = run(model, 5.0f);
    EXPECT_EQ(paired.tokens, plain.tokens);
    EXPECT_NEAR(paired.consistency_sum, 0.0, 1e-6);
    EXPECT_NEAR(paired.loss.to_floats()[0], plain.loss.to_floats()[0], 1e-6);
    EXPECT_NEAR(paired.nll_sum, plain.nll_sum, 1e-5);
  }
  c.dropout = 0.3;
  nn::Transformer model(c);
  const ops::CrossEntropyResult none = run(model, 1e-30f), paired = run(model, 5.0f);
  // Each pass has its own dropout, so they diverge; the seed's masks are the same for both
  // weights, so the losses differ by the weight times the mean divergence over both passes.
  EXPECT_GT(paired.consistency_sum, 1e-3);
  EXPECT_NEAR(paired.consistency_sum, none.consistency_sum, 1e-6);
  EXPECT_EQ(paired.tokens, batch.tgt_tokens);
  const double expected =
      5.0 * paired.consistency_sum / (2.0 * static_cast<double>(batch.tgt_tokens));
  EXPECT_NEAR(paired.loss.to_floats()[0] - none.loss.to_floats()[0], expected, 1e-5);
}

TEST(Transformer, TrainingStepAllocatesNothingInSteadyState) {
  ModelConfig c = tiny_config();
  c.dropout = 0.1;
  nn::Transformer model(c);
  Adam adam(model.parameters());
  nn::Batch batch = make_batch(kSrc, kTgt, 5, 6);
  auto& allocator = CachingAllocator::cpu();
  std::vector<float> losses;
  int64_t before = 0;
  for (int step = 0; step < 4; ++step) {
    if (step == 2) before = allocator.stats().system_allocations;
    Tape tape;
    ops::CrossEntropyResult result;
    {
      TapeScope scope(tape);
      auto ctx = nn::ForwardContext::training(step);
      result = model.loss(batch, ctx);
    }
    tape.backward(result.loss);
    adam.step(1e-3);
    adam.zero_grad();
    losses.push_back(result.loss.to_floats()[0]);
  }
  EXPECT_EQ(allocator.stats().system_allocations - before, 0);
  EXPECT_LT(losses.back(), losses.front());
}

}  // namespace
}  // namespace tfm::internal
