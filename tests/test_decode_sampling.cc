// Sampled decoding (decode/sampling.h): draw_token against the distribution written out by hand
// (a grid of uniform numbers maps onto the kept distribution's quantiles, so the frequencies are
// exact up to the grid's step), sampling_search over a hand-written table (the samples' log p, the
// first token's frequencies, the draws' keys, the search's conventions), and translate() on a tiny
// random Transformer, whose samples' log p equal the model's teacher-forced scores. The uniform
// weights of MBR over samples are tested in test_mbr.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "table_scorer.h"
#include "test_decode_helpers.h"
#include "tfm/core/error.h"
#include "tfm/decode/sampling.h"
#include "tfm/decode/score.h"
#include "tfm/decode/translate.h"

namespace tfm::internal::decode {
namespace {

using testing::kEos;
using testing::random_table;
using testing::TableScorer;

constexpr float kInf = std::numeric_limits<float>::infinity();

// How often each token is drawn for `grid` evenly spaced uniform numbers.
std::vector<double> frequencies(const std::vector<float>& log_probs,
                                const std::vector<int32_t>& blocked, const SamplingOptions& options,
                                int grid = 20000) {
  std::vector<double> count(log_probs.size(), 0.0);
  for (int i = 0; i < grid; ++i) {
    const int32_t t = draw_token(log_probs.data(), static_cast<int64_t>(log_probs.size()), blocked,
                                 (i + 0.5) / grid, options, 0);
    EXPECT_GE(t, 0);
    count[static_cast<size_t>(t)] += 1.0 / grid;
  }
  return count;
}

std::vector<float> log_of(const std::vector<double>& p) {
  std::vector<float> out;
  for (double x : p) out.push_back(x > 0 ? static_cast<float>(std::log(x)) : -kInf);
  return out;
}

TEST(Sampling, DrawsFollowTheTemperedTruncatedDistribution) {
  const std::vector<double> p = {0.0, 0.05, 0.4, 0.01, 0.3, 0.2, 0.04};
  const std::vector<float> row = log_of(p);
  SamplingOptions plain;
  plain.epsilon = 0;
  std::vector<double> got = frequencies(row, {}, plain);
  for (size_t t = 0; t < p.size(); ++t) EXPECT_NEAR(got[t], p[t], 1e-4) << t;

  // Epsilon 0.045: 0.01 and 0.04 are cut; the rest renormalised over 0.95.
  SamplingOptions cut;
  cut.epsilon = 0.045;
  got = frequencies(row, {}, cut);
  for (size_t t = 0; t < p.size(); ++t)
    EXPECT_NEAR(got[t], p[t] < 0.045 ? 0.0 : p[t] / 0.95, 1e-4) << t;

  // Temperature 0.5: q proportional to p^2.
  SamplingOptions sharp;
  sharp.epsilon = 0;
  sharp.temperature = 0.5;
  double squares = 0;
  for (double x : p) squares += x * x;
  got = frequencies(row, {}, sharp);
  for (size_t t = 0; t < p.size(); ++t) EXPECT_NEAR(got[t], p[t] * p[t] / squares, 1e-4) << t;

  // Epsilon applies to the tempered distribution: at T = 2, q is proportional to sqrt(p), and
  // 0.01's q = 0.1 / sum(sqrt(p)) = 0.047 is kept by epsilon 0.04 although p = 0.01 is not.
  SamplingOptions flat;
  flat.epsilon = 0.04;
  flat.temperature = 2;
  double roots = 0;
  for (double x : p) roots += std::sqrt(x);
  got = frequencies(row, {}, flat);
  double kept = 0;
  for (double x : p) kept += std::sqrt(x) / roots >= 0.04 ? std::sqrt(x) : 0.0;
  EXPECT_GT(got[3], 0.0);
  for (size_t t = 0; t < p.size(); ++t)
    EXPECT_NEAR(got[t], std::sqrt(p[t]) / roots >= 0.04 ? std::sqrt(p[t]) / kept : 0.0, 1e-4) << t;
}

TEST(Sampling, BlockedTokensAreNeverDrawnAndEdgeCases) {
  const std::vector<float> row = log_of({0.1, 0.6, 0.3});
  SamplingOptions options;
  options.epsilon = 0;
  const std::vector<double> got = frequencies(row, {1}, options);
  EXPECT_NEAR(got[0], 0.25, 1e-4);
  EXPECT_EQ(got[1], 0.0);
  EXPECT_NEAR(got[2], 0.75, 1e-4);
  // At T = 1 the kept tokens are found from the mass the blocked ones leave (0.4 here): epsilon
  // 0.2 keeps both 0.1 / 0.4 = 0.25 and 0.75 (it would cut the first against the whole row).
  options.epsilon = 0.2;
  const std::vector<double> left = frequencies(row, {1}, options);
  EXPECT_NEAR(left[0], 0.25, 1e-4);
  EXPECT_NEAR(left[2], 0.75, 1e-4);
  // Blocked tokens holding nearly all the mass: the sum is taken token by token (q = 0.8, 0.2).
  const std::vector<float> peaked = log_of({0.0004, 0.9995, 0.0001});
  options.epsilon = 0.1;
  const std::vector<double> rest = frequencies(peaked, {1}, options);
  EXPECT_NEAR(rest[0], 0.8, 1e-4);
  EXPECT_NEAR(rest[2], 0.2, 1e-4);
  options.epsilon = 0.3;
  EXPECT_NEAR(frequencies(peaked, {1}, options)[0], 1.0, 1e-12);
  options.epsilon = 0;
  // Every token blocked: nothing to draw.
  EXPECT_EQ(draw_token(row.data(), 3, {0, 1, 2}, 0.5, options, 0), -1);
  // No token reaches epsilon: the most probable (the lower id among equals).
  options.epsilon = 0.5;
  const std::vector<float> even = log_of({0.25, 0.25, 0.25, 0.25});
  for (double u : {0.0, 0.4, 0.99}) EXPECT_EQ(draw_token(even.data(), 4, {}, u, options, 0), 0);
  // A NaN or +inf log-probability is the model's overflow, named by its step.
  for (float bad : {std::nanf(""), kInf}) {
    std::vector<float> broken = row;
    broken[2] = bad;
    try {
      draw_token(broken.data(), 3, {}, 0.5, options, 6);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("decoding step 7"), std::string::npos) << e.what();
    }
  }
  // Options out of range are errors naming the value.
  for (SamplingOptions bad : {SamplingOptions{0, 0.02, 1.0, 0}, SamplingOptions{4, 1.0, 1.0, 0},
                              SamplingOptions{4, -0.1, 1.0, 0}, SamplingOptions{4, 0.02, 0.0, 0},
                              SamplingOptions{4, 0.02, kInf, 0}})
    EXPECT_THROW(check_sampling_options(bad), Error);
}

constexpr int64_t kVocab = 7;  // 0 pad, 1 unk, 2 bos, 3 eos, words 4..6

std::vector<std::vector<Hypothesis>> sample_table(const testing::Distribution& table,
                                                  const std::vector<int64_t>& max_lengths,
                                                  const std::vector<uint64_t>& keys,
                                                  const SearchOptions& search,
                                                  const SamplingOptions& sampling) {
  TableScorer scorer(kVocab, static_cast<int64_t>(max_lengths.size()), 1, table);
  return sampling_search(scorer, max_lengths, keys, search, sampling);
}

TEST(Sampling, SamplesCarryTheirLogProbAndFollowTheSearchConventions) {
  const testing::Distribution table = random_table(5, kVocab, 0.4);
  SearchOptions search;
  search.alpha = 0.6;
  SamplingOptions sampling;
  sampling.samples = 40;
  sampling.epsilon = 0;
  const std::vector<int64_t> max_lengths = {6, 3, 9};
  const auto found = sample_table(table, max_lengths, {0, 1, 2}, search, sampling);
  ASSERT_EQ(found.size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t s = 0; s < found.size(); ++s) {
    ASSERT_EQ(found[s].size(), 40u) << s;
    for (size_t i = 0; i < found[s].size(); ++i) {
      const Hypothesis& h = found[s][i];
      // log p recomputed from the table, token by token (eos when it ended by eos).
      std::vector<int32_t> prefix;
      double log_prob = 0;
      std::vector<int32_t> generated = h.tokens;
      if (h.ended_by_eos) generated.push_back(kEos);
      for (int32_t t : generated) {
        log_prob += std::log(table(static_cast<int64_t>(s), prefix)[static_cast<size_t>(t)]);
        prefix.push_back(t);
      }
      EXPECT_NEAR(h.log_prob, log_prob, 1e-4) << s << "/" << i;
      EXPECT_EQ(h.length, static_cast<int64_t>(generated.size()));
      EXPECT_LE(h.length, max_lengths[s]);
      EXPECT_TRUE(h.ended_by_eos || h.length == max_lengths[s]);
      EXPECT_DOUBLE_EQ(h.score, h.log_prob / length_penalty(h.length, 0.6));
      if (i > 0) {
        EXPECT_GE(found[s][i - 1].score, h.score) << "not best first";
      }
      distinct.insert(h.tokens);
    }
  }
  EXPECT_GT(distinct.size(), 20u) << "the samples hardly differ";

  // min_length: no sample ends before it; no_repeat_ngram: no repeated bigram.
  search.min_length = 4;
  search.no_repeat_ngram = 2;
  for (const auto& samples : sample_table(table, {9}, {7}, search, sampling))
    for (const Hypothesis& h : samples) {
      EXPECT_GE(h.length, 5) << "eos among the first 4 tokens";
      std::set<std::pair<int32_t, int32_t>> bigrams;
      for (size_t t = 1; t < h.tokens.size(); ++t)
        EXPECT_TRUE(bigrams.insert({h.tokens[t - 1], h.tokens[t]}).second) << "a repeated bigram";
    }
}

TEST(Sampling, FirstTokensFollowTheModelsDistribution) {
  const testing::Distribution table = random_table(9, kVocab);
  const std::vector<double> p = table(0, {});
  SamplingOptions sampling;
  sampling.samples = 4000;
  sampling.epsilon = 0;
  const auto found = sample_table(table, {1}, {0}, {}, sampling);
  std::map<int32_t, double> count;
  for (const Hypothesis& h : found[0]) ++count[h.ended_by_eos ? kEos : h.tokens.front()];
  for (int32_t t = kEos; t < kVocab; ++t) {
    const double expected = p[static_cast<size_t>(t)] * 4000;
    const double sd = std::sqrt(4000 * p[static_cast<size_t>(t)] * (1 - p[static_cast<size_t>(t)]));
    EXPECT_NEAR(count[t], expected, 5 * sd) << "token " << t;
  }
}

TEST(Sampling, DrawsAreKeyedBySeedSourceAndSample) {
  const testing::Distribution table = random_table(3, kVocab, 0.3);
  SamplingOptions sampling;
  sampling.samples = 6;
  const auto tokens_of = [](const std::vector<Hypothesis>& samples) {
    std::multiset<std::vector<int32_t>> out;
    for (const Hypothesis& h : samples) out.insert(h.tokens);
    return out;
  };
  // Source 1 of three (key 1) alone and within the batch: the same samples.
  const auto batch = sample_table(table, {8, 8, 8}, {0, 1, 2}, {}, sampling);
  const testing::Distribution shifted = [&table](int64_t, const std::vector<int32_t>& prefix) {
    return table(1, prefix);
  };
  const auto alone = sample_table(shifted, {8}, {1}, {}, sampling);
  EXPECT_EQ(tokens_of(alone[0]), tokens_of(batch[1]));
  // The same seed again: the same; another seed, or another key: others.
  EXPECT_EQ(tokens_of(sample_table(table, {8, 8, 8}, {0, 1, 2}, {}, sampling)[2]),
            tokens_of(batch[2]));
  sampling.seed = 1;
  EXPECT_NE(tokens_of(sample_table(table, {8, 8, 8}, {0, 1, 2}, {}, sampling)[1]),
            tokens_of(batch[1]));
  sampling.seed = 0;
  EXPECT_NE(tokens_of(sample_table(shifted, {8}, {5}, {}, sampling)[0]), tokens_of(batch[1]));
}

TEST(Sampling, TranslateSamplesCarryTheModelsTeacherForcedLogProb) {
  const ModelConfig config = testing::tiny_decoder_config();
  nn::Transformer model(config);
  model.init(17);
  const InferenceModel packed(model, {DType::f32, Device::cpu});
  const auto sources =
      testing::random_sources({5, 8, 3, 6}, static_cast<int32_t>(config.vocab_size), 4);
  TranslateOptions options;
  options.sampling.samples = 5;
  options.max_length = 12;
  options.batch_size = 3;  // two batches
  const auto found = translate(packed, sources, options);
  ASSERT_EQ(found.size(), sources.size());
  std::vector<std::vector<int32_t>> repeated_sources, targets;
  std::vector<const Hypothesis*> samples;
  for (size_t s = 0; s < found.size(); ++s) {
    ASSERT_EQ(found[s].size(), 5u);
    for (const Hypothesis& h : found[s]) {
      repeated_sources.push_back(sources[s]);
      targets.push_back(h.tokens);
      samples.push_back(&h);
    }
  }
  // Scoring appends eos: a sample cut at the maximum length sums its tokens' terms without it.
  const std::vector<TargetScore> scored = score(packed, repeated_sources, targets);
  for (size_t i = 0; i < scored.size(); ++i) {
    const std::vector<float>& terms = scored[i].token_log_probs;
    double log_prob = 0;
    for (int64_t t = 0; t < samples[i]->length; ++t) log_prob += terms[static_cast<size_t>(t)];
    EXPECT_NEAR(samples[i]->log_prob, log_prob, 1e-3 * (1 + std::fabs(log_prob))) << i;
  }
  // Another batch size: each sentence's samples unchanged (keyed by its index, not its batch).
  options.batch_size = 1;
  const auto again = translate(packed, sources, options);
  for (size_t s = 0; s < found.size(); ++s)
    for (size_t i = 0; i < found[s].size(); ++i)
      EXPECT_EQ(again[s][i].tokens, found[s][i].tokens) << s << "/" << i;
  // Constraints and attention probes belong to the searches.
  options.attention = {0, -1};
  EXPECT_THROW(translate(packed, sources, options), Error);
}

}  // namespace
}  // namespace tfm::internal::decode
