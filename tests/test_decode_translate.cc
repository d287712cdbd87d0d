// decode::translate on a tiny random Transformer: batching (sorted by length, finished sentences
// leaving the batch) gives the same output as one sentence at a time, in input order; beam 1 =
// greedy; length limits; attention weights per output token; early stopping changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/core/threading.h"
#include "tfm/decode/translate.h"
#include "tfm/model/model_dir.h"

namespace tfm::internal::decode {
namespace {

using testing::random_sources;
using testing::tiny_decoder_config;

const std::vector<int> kLengths{3, 9, 1, 5, 5, 2, 7};

void expect_same(const std::vector<std::vector<Hypothesis>>& a,
                 const std::vector<std::vector<Hypothesis>>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    ASSERT_EQ(a[s].size(), b[s].size()) << "sentence " << s;
    for (size_t i = 0; i < a[s].size(); ++i) {
      EXPECT_EQ(a[s][i].tokens, b[s][i].tokens) << "sentence " << s << ", hypothesis " << i;
      EXPECT_EQ(a[s][i].ended_by_eos, b[s][i].ended_by_eos) << "sentence " << s;
      EXPECT_NEAR(a[s][i].score, b[s][i].score, tolerance) << "sentence " << s;
      EXPECT_NEAR(a[s][i].log_prob, b[s][i].log_prob, tolerance) << "sentence " << s;
    }
  }
}

std::vector<std::vector<Hypothesis>> one_at_a_time(const nn::Transformer& model,
                                                   const std::vector<std::vector<int32_t>>& src,
                                                   TranslateOptions options) {
  options.batch_size = 1;
  std::vector<std::vector<Hypothesis>> out;
  for (const auto& s : src) out.push_back(translate(model, {s}, options)[0]);
  return out;
}

class Translate : public ::testing::Test {
 protected:
  Translate() : config_(tiny_decoder_config()), model_(config_) {
    model_.init(21);
    sources_ = random_sources(kLengths, static_cast<int32_t>(config_.vocab_size), 22);
  }
  ModelConfig config_;
  nn::Transformer model_;
  std::vector<std::vector<int32_t>> sources_;
};

// Batches of 3 sorted by length: the batch shrinks as sentences of different maximum lengths (and
// eos) finish; each result must still be that sentence's own translation, in input order.
TEST_F(Translate, BatchesGiveOneSentenceAtATimeResultsInInputOrder) {
  for (int64_t beam : {1, 3}) {
    SCOPED_TRACE("beam " + std::to_string(beam));
    TranslateOptions options;
    options.beam_size = beam;
    options.n_best = beam == 1 ? 1 : 2;
    options.max_length_offset = 6;
    options.batch_size = 3;
    auto batched = translate(model_, sources_, options);
    auto single = one_at_a_time(model_, sources_, options);
    expect_same(batched, single, 1e-4);
    options.sort_by_length = false;
    expect_same(translate(model_, sources_, options), single, 1e-4);
    // A token budget cuts batches by padded source tokens instead.
    options.sort_by_length = true;
    options.batch_size = 100;
    options.batch_tokens = 12;
    expect_same(translate(model_, sources_, options), single, 1e-4);
    options.batch_tokens = 0;
    options.batch_size = 3;
    for (size_t s = 0; s < sources_.size(); ++s) {
      ASSERT_EQ(batched[s].size(), static_cast<size_t>(options.n_best));
      EXPECT_LE(batched[s][0].length, static_cast<int64_t>(sources_[s].size()) + 6);
      if (beam > 1) {
        EXPECT_GE(batched[s][0].score, batched[s][1].score);
      }
    }
  }
}

TEST_F(Translate, BeamOfOneEqualsGreedyWithoutLengthPenalty) {
  TranslateOptions options;
  options.max_length_offset = 8;
  std::vector<int32_t> lengths;
  int64_t width = 9;
  std::vector<int32_t> ids;
  for (const auto& s : sources_) {
    lengths.push_back(static_cast<int32_t>(s.size()));
    for (int64_t t = 0; t < width; ++t)
      ids.push_back(t < static_cast<int64_t>(s.size()) ? s[static_cast<size_t>(t)] : 0);
  }
  std::vector<int64_t> max_lengths;
  for (int32_t l : lengths) max_lengths.push_back(max_output_length(l, options, config_));
  auto ctx = nn::ForwardContext::inference();
  const auto rows = static_cast<int64_t>(sources_.size());
  Tensor memory = model_.encode(Tensor::from_ints({rows, width}, ids), lengths, ctx);
  SearchOptions search = search_options(options, config_);
  search.beam_size = 1;
  search.alpha = 0.0;
  TransformerScorer for_beam(model_, memory, lengths, 1, 4),
      for_greedy(model_, memory, lengths, 1, 4);
  auto beam = beam_search(for_beam, max_lengths, search);
  auto greedy = greedy_search(for_greedy, max_lengths, search);
  expect_same(beam, greedy, 1e-12);
}

// The benchmark's setting: eos suppressed up to a fixed maximum, so every output has exactly that
// many tokens.
TEST_F(Translate, FixedLengthWithEosSuppressed) {
  for (int64_t beam : {1, 4}) {
    TranslateOptions options;
    options.beam_size = beam;
    options.max_length = 5;
    options.min_length = 5;
    for (const auto& hypotheses : translate(model_, sources_, options)) {
      ASSERT_EQ(hypotheses.size(), 1u);
      EXPECT_EQ(hypotheses[0].tokens.size(), 5u);
      EXPECT_FALSE(hypotheses[0].ended_by_eos);
      for (int32_t t : hypotheses[0].tokens) EXPECT_NE(t, config_.eos_id);
    }
  }
}

TEST_F(Translate, ReturnsAttentionWeightsPerOutputToken) {
  for (int64_t head : {-1, 1}) {
    TranslateOptions options;
    options.beam_size = 2;
    options.max_length_offset = 4;
    options.attention = {1, head};
    auto result = translate(model_, sources_, options);
    for (size_t s = 0; s < sources_.size(); ++s) {
      const Hypothesis& h = result[s][0];
      ASSERT_EQ(static_cast<int64_t>(h.attention.size()), h.length) << "sentence " << s;
      for (const auto& weights : h.attention) {
        ASSERT_EQ(weights.size(), sources_[s].size());
        float sum = 0;
        for (float w : weights) sum += w;
        EXPECT_NEAR(sum, 1.0f, 1e-5f);
      }
    }
    options.attention = {};
    auto plain = translate(model_, sources_, options);
    expect_same(result, plain, 0.0);
    EXPECT_TRUE(plain[0][0].attention.empty());
  }
}

TEST_F(Translate, EarlyStoppingChangesNothing) {
  TranslateOptions options;
  options.beam_size = 3;
  options.n_best = 3;
  options.max_length_offset = 10;
  for (double alpha : {0.0, 0.6, 1.5}) {
    options.alpha = alpha;
    options.early_stopping = true;
    auto early = translate(model_, sources_, options);
    options.early_stopping = false;
    expect_same(early, translate(model_, sources_, options), 1e-12);
  }
}

TEST_F(Translate, RejectsBadInput) {
  TranslateOptions options;
  testing::expect_error(
      [&] {
        translate(model_, {{5, 6}, {}}, options);
      },
      {"source sentence 1 is empty"});
  testing::expect_error(
      [&] {
        translate(model_, {{5, 99}}, options);
      },
      {"id 99", "vocabulary of size 40"});
  options.n_best = 5;
  testing::expect_error([&] { translate(model_, {{5, 6}}, options); }, {"n_best 5"});
}

// The recipe of the translate command: load a model directory, build the Transformer, translate.
TEST_F(Translate, ModelDirectoryRoundTripTranslatesTheSame) {
  testing::TempDir dir;
  save_model_dir(dir.path() / "model", config_, model_.named_parameters());
  const LoadedModel loaded = load_model_dir(dir.path() / "model");
  const nn::Transformer reloaded(loaded.config, loaded.parameters);
  // The loaded tensors are adopted, not copied.
  EXPECT_TRUE(reloaded.output_embedding().same_storage(loaded.parameter("embedding.weight")));
  TranslateOptions options;
  options.max_length_offset = 5;
  expect_same(translate(reloaded, sources_, options), translate(model_, sources_, options), 0.0);
}

// One immutable model shared by decoding threads (a server's workers): each thread's results are
// exactly those of a single thread, with beam search and with sequences beyond the precomputed
// positions (sinusoids computed per call, never cached in the shared model).
// Decoding workers in their own threads, each with its own Translator (options and OpenMP thread
// count), translating at once with ONE shared InferenceModel, give exactly what each gives alone;
// for f32 and bf16 models. Every output runs past the precomputed sinusoids (eos suppressed until
// then). Nothing depends on timing: each worker compares every one of its repeats.
TEST_F(Translate, ThreadsSharingOneModelGiveTheResultsOfOne) {
  const int before = num_threads();
  for (DType precision : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(precision));
    const auto shared =
        std::make_shared<const InferenceModel>(model_, InferenceOptions{precision, Device::cpu});
    std::vector<Translator> workers;
    for (int w = 0; w < 4; ++w) {
      TranslateOptions options;
      options.beam_size = w % 2 == 0 ? 3 : 1;
      options.min_length = options.max_length = config_.max_positions + 4;
      // 1 and 2 OpenMP threads, at most the default count (1 under scripts/tsan.sh, where
      // libgomp's own barriers would look like races).
      workers.emplace_back(shared, options, std::min(1 + w / 2, std::max(1, before)));
    }
    std::vector<std::vector<std::vector<Hypothesis>>> alone;
    for (const Translator& worker : workers) alone.push_back(worker.translate(sources_));
    EXPECT_EQ(num_threads(), before);  // a worker's count is its own
    ASSERT_EQ(alone[0][0][0].tokens.size(), static_cast<size_t>(config_.max_positions + 4));

    constexpr int kRepeats = 3;
    std::vector<std::vector<std::vector<std::vector<Hypothesis>>>> together(workers.size());
    std::vector<std::thread> threads;
    for (size_t w = 0; w < workers.size(); ++w)
      threads.emplace_back([&, w] {
        for (int repeat = 0; repeat < kRepeats; ++repeat)
          together[w].push_back(workers[w].translate(sources_));
      });
    for (std::thread& thread : threads) thread.join();
    for (size_t w = 0; w < workers.size(); ++w) {
      SCOPED_TRACE("worker " + std::to_string(w));
      ASSERT_EQ(together[w].size(), static_cast<size_t>(kRepeats));
      for (const auto& result : together[w]) expect_same(result, alone[w], 0.0);
    }
  }
}

// A thread count set in one thread (ThreadCountScope) is that thread's alone, and is restored.
TEST(ThreadCountScope, SetsTheCallingThreadsCountOnlyAndRestoresIt) {
  const int before = num_threads();
  {
    const ThreadCountScope three(3);
    EXPECT_EQ(num_threads(), 3);
    {
      const ThreadCountScope unchanged(0);
      EXPECT_EQ(num_threads(), 3);
    }
    int inside = 0;
    std::thread other([&] {
      const ThreadCountScope two(2);
      inside = num_threads();
    });
    other.join();
    EXPECT_EQ(inside, 2);
    EXPECT_EQ(num_threads(), 3);
  }
  EXPECT_EQ(num_threads(), before);
}

// More threads than kMaxThreads ended the process (100000 in a Translator killed Python); every
// way in (a scope, set_num_threads, a Translator) is now a one-line error, and nothing changes.
TEST(ThreadCountScope, MoreThreadsThanTheMaximumAreAnError) {
  const int before = num_threads();
  testing::expect_error([] { const ThreadCountScope many(100000); },
                        {"threads 100000 is more than the maximum of 4096"});
  testing::expect_error([] { set_num_threads(kMaxThreads + 1); }, {"4097", "maximum of 4096"});
  EXPECT_EQ(num_threads(), before);
  ModelConfig config = tiny_decoder_config();
  nn::Transformer model(config);
  model.init(3);
  const auto shared = std::make_shared<const InferenceModel>(model, InferenceOptions{});
  testing::expect_error([&] { const Translator many(shared, {}, 50000); },
                        {"translator: threads 50000 is more than the maximum of 4096"});
  EXPECT_NO_THROW({ const Translator most(shared, {}, kMaxThreads); });
}

// A beam of half the vocabulary or more asks each row for more candidates (2 x beam) than there
// are tokens; the fused output kernel refused ("m 50 must be in [1, vocab 40]"). The search now
// takes every token of a row, and the wider beams translate.
TEST_F(Translate, ABeamOfHalfTheVocabularyOrMoreTranslates) {
  ASSERT_EQ(config_.vocab_size, 40);
  TranslateOptions options;
  options.max_length_offset = 4;
  options.batch_size = 3;
  for (int64_t beam : {20, 21, 40, 64}) {
    SCOPED_TRACE("beam " + std::to_string(beam));
    options.beam_size = beam;
    options.n_best = 3;
    const auto found = translate(model_, sources_, options);
    ASSERT_EQ(found.size(), sources_.size());
    for (const auto& nbest : found) {
      ASSERT_EQ(nbest.size(), 3u);
      for (const Hypothesis& h : nbest) EXPECT_TRUE(std::isfinite(h.score));
    }
    expect_same(found, one_at_a_time(model_, sources_, options), 1e-4);
  }
}

// Weights x 1e30 overflow the activations to inf and NaN: every output was empty (exit 0, no n-best
// lines). Greedy and beam, it is an error naming the decoding step.
void expect_overflow_error(const ModelConfig& config,
                           const std::vector<std::vector<int32_t>>& sources,
                           std::initializer_list<InferenceOptions> precisions) {
  nn::Transformer overflowing(config);
  overflowing.init(21);
  for (const Tensor& p : overflowing.parameters()) {
    float* x = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) x[i] *= 1e30f;
  }
  for (const InferenceOptions& precision : precisions) {
    const InferenceModel packed(overflowing, precision);
    for (int64_t beam : {1, 3}) {
      SCOPED_TRACE(precision_name(precision) + ", beam " + std::to_string(beam));
      TranslateOptions options;
      options.beam_size = beam;
      options.n_best = beam;
      testing::expect_error(
          [&] { translate(packed, sources, options); },
          {"decoding step 1: the model's log-probabilities are not finite", "overflow"});
    }
  }
}

// f32 and int8.
TEST_F(Translate, AnOverflowingModelIsAnErrorNamingTheStep) {
  expect_overflow_error(config_, sources_,
                        {{DType::f32, Device::cpu, false}, {DType::f32, Device::cpu, true}});
}

// bf16 products (a CPU where oneDNN packs bf16 weights).
TEST_F(Translate, AnOverflowingModelIsAnErrorNamingTheStepInBf16) {
  expect_overflow_error(config_, sources_, {{DType::bf16, Device::cpu, false}});
}

TEST(TranslateLimits, LearnedPositionsCapTheOutputLength) {
  ModelConfig config = tiny_decoder_config("post", "learned");
  config.max_positions = 12;
  TranslateOptions options;
  EXPECT_EQ(max_output_length(3, options, config), 12);
  config.positional = "sinusoidal";
  EXPECT_EQ(max_output_length(3, options, config), 53);
  options.max_length = 7;
  EXPECT_EQ(max_output_length(3, options, config), 7);
}

TEST_F(Translate, SourcesLongerThanTheMaximumInputLengthAreErrors) {
  // Default: the model's max_positions (64), for sinusoidal positions too.
  EXPECT_EQ(max_input_length(TranslateOptions{}, config_), 64);
  const auto long_source = random_sources({65}, static_cast<int32_t>(config_.vocab_size), 5);
  testing::expect_error(
      [&] {
        translate(model_, {{5, 6}, long_source[0]}, TranslateOptions{});
      },
      {"source sentence 1 has 65 tokens", "maximum input length 64"});
  TranslateOptions options;
  options.max_input_length = 3;
  testing::expect_error(
      [&] {
        translate(model_, {{5, 6, 7, 8}}, options);
      },
      {"source sentence 0 has 4 tokens", "maximum input length 3"});
  EXPECT_EQ(translate(model_, {{5, 6, 7}}, options).size(), 1u);
  // Sinusoids may go past max_positions when asked; a learned table may not.
  options.max_input_length = 100;
  EXPECT_EQ(max_input_length(options, config_), 100);
  EXPECT_EQ(translate(model_, long_source, options).size(), 1u);
  const ModelConfig learned = tiny_decoder_config("post", "learned");
  testing::expect_error([&] { max_input_length(options, learned); },
                        {"maximum input length 100", "learned position table of 64"});
}

}  // namespace
}  // namespace tfm::internal::decode
