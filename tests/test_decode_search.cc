// Beam and greedy search over hand-written "models" (StepScorer implementations whose next-token
// distribution is a fixed function of the prefix): exhaustive beams against brute-force
// enumeration, the length penalty's effect computed by hand, early termination, beam 1 = greedy.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "table_scorer.h"
#include "temp_dir.h"
#include "tfm/decode/search.h"

namespace tfm::internal::decode {
namespace {

using testing::Distribution;
using testing::kBos;
using testing::kEos;
using testing::kNegInf;
using testing::TableScorer;

// Vocabulary of the random tables: 0 pad, 1 unk, 2 bos (never produced), 3 eos, words 4..6.
constexpr int64_t kVocab = 7;
const std::vector<int32_t> kWords{4, 5, 6};

// A fixed pseudo-random distribution per (source, prefix): eos gets weight `eos_weight` times a
// random factor, words random weights plus `peak` for one word chosen at random (a peaky table
// makes long hypotheses cheap, so the length penalty can favour them); pad, unk and bos get 0.
Distribution random_table(uint64_t seed, double eos_weight, double peak = 0.0) {
  return [seed, eos_weight, peak](int64_t source, const std::vector<int32_t>& prefix) {
    uint64_t h = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(source) * 1000003u;
    for (int32_t t : prefix) h = (h ^ static_cast<uint64_t>(t)) * 0x100000001b3ull;
    std::mt19937_64 rng(h);
    std::uniform_real_distribution<double> u(0.05, 1.0);
    std::vector<double> p(kVocab, 0.0);
    p[kEos] = eos_weight * u(rng);
    for (int32_t w : kWords) p[static_cast<size_t>(w)] = u(rng);
    p[static_cast<size_t>(kWords[rng() % kWords.size()])] += peak;
    double sum = 0;
    for (double x : p) sum += x;
    for (double& x : p) x /= sum;
    return p;
  };
}

// Every output the search could produce for one source, scored exactly as the search scores it
// (log p rounded to float as the scorer returns them, summed in double), best first.
std::vector<Hypothesis> enumerate(const Distribution& dist, int64_t source, int64_t max_length,
                                  int64_t min_length, double alpha) {
  std::vector<Hypothesis> all;
  std::function<void(std::vector<int32_t>&, double)> extend = [&](std::vector<int32_t>& prefix,
                                                                  double log_prob) {
    std::vector<double> p = dist(source, prefix);
    const auto length = static_cast<int64_t>(prefix.size()) + 1;
    auto lp = [&](int32_t t) { return static_cast<double>(static_cast<float>(std::log(p[t]))); };
    if (static_cast<int64_t>(prefix.size()) >= min_length) {
      Hypothesis h{prefix, log_prob + lp(kEos), 0.0, length, true, {}};
      h.score = h.log_prob / length_penalty(length, alpha);
      all.push_back(h);
    }
    for (int32_t w : kWords) {
      prefix.push_back(w);
      if (length == max_length) {
        Hypothesis h{prefix, log_prob + lp(w), 0.0, length, false, {}};
        h.score = h.log_prob / length_penalty(length, alpha);
        all.push_back(h);
      } else {
        extend(prefix, log_prob + lp(w));
      }
      prefix.pop_back();
    }
  };
  std::vector<int32_t> empty;
  extend(empty, 0.0);
  std::stable_sort(all.begin(), all.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return all;
}

void expect_same_hypotheses(const std::vector<Hypothesis>& got, const std::vector<Hypothesis>& want,
                            size_t n) {
  ASSERT_GE(got.size(), n);
  ASSERT_GE(want.size(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "rank " << i;
    EXPECT_EQ(got[i].ended_by_eos, want[i].ended_by_eos) << "rank " << i;
    EXPECT_EQ(got[i].length, want[i].length) << "rank " << i;
    EXPECT_NEAR(got[i].log_prob, want[i].log_prob, 1e-9) << "rank " << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-9) << "rank " << i;
  }
}

TEST(BeamSearch, LengthPenaltyFollowsWuEtAl) {
  EXPECT_DOUBLE_EQ(length_penalty(1, 0.6), 1.0);
  EXPECT_DOUBLE_EQ(length_penalty(7, 1.0), 2.0);
  EXPECT_NEAR(length_penalty(25, 0.6), std::pow(5.0, 0.6), 1e-12);
  EXPECT_DOUBLE_EQ(length_penalty(40, 0.0), 1.0);
}

// With a beam wide enough to keep every prefix (27 prefixes x 4 tokens = 108 candidates at the last
// step of max length 4) nothing is pruned, so the n-best must be the brute-force n-best; the
// sources have different maximum lengths, and early termination is on.
TEST(BeamSearch, ExhaustiveBeamFindsTheBruteForceBest) {
  struct Case {
    double alpha;
    int64_t min_length;
  };
  for (Case c : {Case{0.6, 0}, Case{0.0, 0}, Case{1.0, 0}, Case{0.6, 2}}) {
    SCOPED_TRACE("alpha " + std::to_string(c.alpha) + ", min_length " +
                 std::to_string(c.min_length));
    Distribution dist = random_table(17, 0.8);
    SearchOptions options;
    options.beam_size = 108;
    options.n_best = 12;
    options.alpha = c.alpha;
    options.min_length = c.min_length;
    const std::vector<int64_t> max_lengths{4, 3};
    TableScorer scorer(kVocab, 2, options.beam_size, dist);
    auto found = beam_search(scorer, max_lengths, options);
    ASSERT_EQ(found.size(), 2u);
    for (int64_t s = 0; s < 2; ++s) {
      auto want = enumerate(dist, s, max_lengths[static_cast<size_t>(s)], c.min_length, c.alpha);
      expect_same_hypotheses(found[static_cast<size_t>(s)], want, 12);
      for (const auto& h : found[static_cast<size_t>(s)])
        EXPECT_GE(static_cast<int64_t>(h.tokens.size()), c.min_length);
    }
  }
}

// Vocabulary 0 pad, 1 unk, 2 bos, 3 eos, 4 "a"; maximum length 2. By hand:
//   [] eos:    p = 0.4           log p = -0.91629  length 1, lp(1) = 1
//   [a] eos:   p = 0.6 * 0.62    log p = -0.98886  length 2, lp(2) = (7/6)^alpha
//   [a a]:     p = 0.6 * 0.38    log p = -1.47834  length 2 (cut at the maximum)
// alpha = 0: -0.91629 > -0.98886, the short output wins.
// alpha = 1: -0.98886 / (7/6) = -0.84760 > -0.91629, the long one wins.
TEST(BeamSearch, LengthPenaltyDecidesBetweenShortAndLong) {
  Distribution dist = [](int64_t, const std::vector<int32_t>& prefix) {
    std::vector<double> p(5, 0.0);
    if (prefix.empty()) {
      p[kEos] = 0.4;
      p[4] = 0.6;
    } else {
      p[kEos] = 0.62;
      p[4] = 0.38;
    }
    return p;
  };
  for (double alpha : {0.0, 1.0}) {
    SearchOptions options;
    options.beam_size = 2;
    options.n_best = 2;
    options.alpha = alpha;
    TableScorer scorer(5, 1, 2, dist);
    auto found = beam_search(scorer, {2}, options)[0];
    ASSERT_EQ(found.size(), 2u);
    // The scorer hands log p over as float.
    auto log_f = [](double p) { return static_cast<double>(static_cast<float>(std::log(p))); };
    const double short_score = log_f(0.4);
    const double long_log_prob = log_f(0.6) + log_f(0.62);
    if (alpha == 0.0) {
      EXPECT_TRUE(found[0].tokens.empty());
      EXPECT_NEAR(found[0].score, -0.91629, 1e-5);
      EXPECT_NEAR(found[0].score, short_score, 1e-12);
      EXPECT_EQ(found[1].tokens, std::vector<int32_t>{4});
      EXPECT_NEAR(found[1].score, -0.98886, 1e-5);
    } else {
      EXPECT_EQ(found[0].tokens, std::vector<int32_t>{4});
      EXPECT_TRUE(found[0].ended_by_eos);
      EXPECT_NEAR(found[0].score, -0.84760, 1e-5);
      EXPECT_NEAR(found[0].score, long_log_prob / (7.0 / 6.0), 1e-12);
      EXPECT_TRUE(found[1].tokens.empty());
      EXPECT_NEAR(found[1].score, -0.91629, 1e-5);
    }
  }
}

// Early termination must not change the n-best, and must actually stop early somewhere.
TEST(BeamSearch, EarlyTerminationDoesNotChangeTheResult) {
  int stopped_earlier = 0;
  for (double alpha : {0.0, 0.6, 1.0, -0.5}) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      for (int64_t beam : {1, 2, 3}) {
        SCOPED_TRACE("alpha " + std::to_string(alpha) + ", seed " + std::to_string(seed) +
                     ", beam " + std::to_string(beam));
        Distribution dist = seed <= 4 ? random_table(seed, 2.0) : random_table(seed, 2.0, 3.0);
        SearchOptions options;
        options.beam_size = beam;
        options.n_best = beam;
        options.alpha = alpha;
        const std::vector<int64_t> max_lengths{9, 7, 12};
        TableScorer early(kVocab, 3, beam, dist), full(kVocab, 3, beam, dist);
        auto a = beam_search(early, max_lengths, options);
        options.early_stopping = false;
        auto b = beam_search(full, max_lengths, options);
        for (size_t s = 0; s < 3; ++s) expect_same_hypotheses(a[s], b[s], a[s].size());
        for (size_t s = 0; s < 3; ++s) EXPECT_EQ(a[s].size(), b[s].size());
        EXPECT_LE(early.steps(), full.steps());
        stopped_earlier += early.steps() < full.steps();
      }
    }
  }
  EXPECT_GT(stopped_earlier, 10);
}

TEST(BeamSearch, BeamOfOneEqualsGreedyWithoutLengthPenalty) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Distribution dist = random_table(seed, 0.5);
    SearchOptions options;
    options.beam_size = 1;
    options.alpha = 0.0;
    const std::vector<int64_t> max_lengths{6, 10, 3, 8};
    TableScorer a(kVocab, 4, 1, dist), b(kVocab, 4, 1, dist);
    auto beam = beam_search(a, max_lengths, options);
    auto greedy = greedy_search(b, max_lengths, options);
    for (size_t s = 0; s < 4; ++s) expect_same_hypotheses(beam[s], greedy[s], 1);
  }
}

TEST(GreedySearch, PicksTheMostProbableTokenAndScoresIt) {
  // Always eos 0.3, word 4 0.5, word 5 0.2: greedy takes 4 until the maximum length 3.
  Distribution dist = [](int64_t, const std::vector<int32_t>&) {
    return std::vector<double>{0, 0, 0, 0.3, 0.5, 0.2, 0};
  };
  SearchOptions options;
  options.beam_size = 1;
  TableScorer scorer(kVocab, 1, 1, dist);
  auto h = greedy_search(scorer, {3}, options)[0];
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].tokens, (std::vector<int32_t>{4, 4, 4}));
  EXPECT_FALSE(h[0].ended_by_eos);
  EXPECT_NEAR(h[0].log_prob, 3 * std::log(0.5), 1e-6);
  EXPECT_NEAR(h[0].score, 3 * std::log(0.5) / std::pow(8.0 / 6.0, 0.6), 1e-6);
}

// A NaN or +inf log-probability (a model whose activations overflowed) used to pass through the
// searches as an empty output; it is an error naming the decoding step.
TEST(BeamSearch, NonFiniteLogProbabilitiesAreAnErrorNamingTheStep) {
  const Distribution table = random_table(4, 1.0);
  const Distribution overflowing = [&](int64_t source, const std::vector<int32_t>& prefix) {
    std::vector<double> p = table(source, prefix);
    if (prefix.size() == 2) p[5] = std::numeric_limits<double>::infinity();
    return p;
  };
  SearchOptions options;
  options.min_length = 5;  // no hypothesis ends before the third step
  for (int64_t beam : {1, 3}) {
    SCOPED_TRACE("beam " + std::to_string(beam));
    options.beam_size = beam;
    TableScorer scorer(kVocab, 2, beam, overflowing);
    testing::expect_error(
        [&] {
          beam == 1 ? greedy_search(scorer, {8, 8}, options) : beam_search(scorer, {8, 8}, options);
        },
        {"decoding step 3: the model's log-probabilities are not finite"});
  }
}

TEST(BeamSearch, RejectsInconsistentOptions) {
  Distribution dist = random_table(1, 1.0);
  TableScorer scorer(kVocab, 2, 3, dist);
  SearchOptions options;
  options.beam_size = 3;
  options.n_best = 4;
  testing::expect_error([&] { beam_search(scorer, {5, 5}, options); }, {"n_best 4"});
  options.n_best = 1;
  testing::expect_error([&] { beam_search(scorer, {5}, options); }, {"6 rows", "1 sources"});
  testing::expect_error([&] { beam_search(scorer, {5, 0}, options); }, {"maximum output length 0"});
}

}  // namespace
}  // namespace tfm::internal::decode
