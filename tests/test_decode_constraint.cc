// Constrained search (decode/constraint.h) over hand-written "models" and a tiny random
// Transformer: a constraint that allows everything changes nothing, greedy and beam search return
// only allowed sequences (the best of them, against brute-force enumeration), a hypothesis with
// nothing allowed drops out without ending the search, and translate() hands each source its own
// start state.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>

#include "table_scorer.h"
#include "test_decode_helpers.h"
#include "tfm/core/error.h"
#include "tfm/decode/search.h"
#include "tfm/decode/translate.h"

namespace tfm::internal::decode {
namespace {

using testing::Distribution;
using testing::kEos;
using testing::random_table;
using testing::TableScorer;

constexpr int64_t kVocab = 8;  // 0 pad, 1 unk, 2 bos, 3 eos, words 4..7

// A constraint given as a rule on the prefix: allowed(source, prefix) lists the tokens allowed
// next (eos among them when it may end). States keep the prefix; `clones` counts copies.
using Rule = std::function<std::vector<int32_t>(int64_t source, const std::vector<int32_t>&)>;

class RuleState final : public ConstraintState {
 public:
  RuleState(const Rule* rule, int64_t source) : rule_(rule), source_(source) {}
  std::unique_ptr<ConstraintState> clone() const override {
    return std::make_unique<RuleState>(*this);
  }
  void allowed(std::vector<int32_t>& tokens) const override {
    for (int32_t t : (*rule_)(source_, prefix_))
      if (t != kEos) tokens.push_back(t);
  }
  bool may_end() const override {
    const std::vector<int32_t> next = (*rule_)(source_, prefix_);
    return std::find(next.begin(), next.end(), kEos) != next.end();
  }
  void advance(int32_t token) override {
    std::vector<int32_t> next = (*rule_)(source_, prefix_);
    EXPECT_NE(std::find(next.begin(), next.end(), token), next.end())
        << "advanced by a token the rule does not allow";
    prefix_.push_back(token);
  }

 private:
  const Rule* rule_;
  int64_t source_;
  std::vector<int32_t> prefix_;
};

class RuleConstraint final : public Constraint {
 public:
  explicit RuleConstraint(Rule rule) : rule_(std::move(rule)) {}
  std::unique_ptr<ConstraintState> start(int64_t source, int64_t) const override {
    return std::make_unique<RuleState>(&rule_, source);
  }
  std::vector<std::unique_ptr<ConstraintState>> starts(int64_t sources) const {
    std::vector<std::unique_ptr<ConstraintState>> out;
    for (int64_t s = 0; s < sources; ++s) out.push_back(start(s, 0));
    return out;
  }
  const Rule& rule() const { return rule_; }

 private:
  Rule rule_;
};

// Every token of a vocabulary, eos included.
Rule everything_in(int64_t vocab) {
  return [vocab](int64_t, const std::vector<int32_t>&) {
    std::vector<int32_t> all;
    for (int32_t t = 0; t < vocab; ++t) all.push_back(t);
    return all;
  };
}

// Source s: words alternate between even and odd ids, the first one of parity s % 2, and the
// output ends after exactly 3 + s words; a second word 5 is a dead end (nothing follows it).
std::vector<int32_t> alternating(int64_t source, const std::vector<int32_t>& prefix) {
  if (prefix.size() == 2 && prefix[1] == 5) return {};
  if (static_cast<int64_t>(prefix.size()) == 3 + source) return {kEos};
  const int parity = prefix.empty() ? static_cast<int>(source % 2) : 1 - prefix.back() % 2;
  return parity == 0 ? std::vector<int32_t>{4, 6} : std::vector<int32_t>{5, 7};
}

bool follows(const Rule& rule, int64_t source, const Hypothesis& h) {
  std::vector<int32_t> prefix;
  for (int32_t t : h.tokens) {
    const std::vector<int32_t> next = rule(source, prefix);
    if (std::find(next.begin(), next.end(), t) == next.end()) return false;
    prefix.push_back(t);
  }
  const std::vector<int32_t> next = rule(source, prefix);
  return h.ended_by_eos && std::find(next.begin(), next.end(), kEos) != next.end();
}

// Every complete output the rule allows for a source within max_length, scored as the search does.
std::vector<Hypothesis> allowed_outputs(const Distribution& dist, const Rule& rule, int64_t source,
                                        int64_t max_length, double alpha) {
  std::vector<Hypothesis> all;
  std::function<void(std::vector<int32_t>&, double)> extend = [&](std::vector<int32_t>& prefix,
                                                                  double log_prob) {
    const std::vector<double> p = dist(source, prefix);
    const auto length = static_cast<int64_t>(prefix.size()) + 1;
    for (int32_t t : rule(source, prefix)) {
      const double next = log_prob + static_cast<float>(std::log(p[static_cast<size_t>(t)]));
      if (t == kEos) {
        Hypothesis h{prefix, next, 0.0, length, true, {}};
        h.score = next / length_penalty(length, alpha);
        all.push_back(h);
      } else if (length < max_length) {
        prefix.push_back(t);
        extend(prefix, next);
        prefix.pop_back();
      }
    }
  };
  std::vector<int32_t> empty;
  extend(empty, 0.0);
  std::stable_sort(all.begin(), all.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  return all;
}

void expect_identical(const std::vector<std::vector<Hypothesis>>& a,
                      const std::vector<std::vector<Hypothesis>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) {
    ASSERT_EQ(a[s].size(), b[s].size()) << "source " << s;
    for (size_t i = 0; i < a[s].size(); ++i) {
      EXPECT_EQ(a[s][i].tokens, b[s][i].tokens) << "source " << s << " rank " << i;
      EXPECT_EQ(a[s][i].log_prob, b[s][i].log_prob) << "source " << s << " rank " << i;
      EXPECT_EQ(a[s][i].score, b[s][i].score) << "source " << s << " rank " << i;
      EXPECT_EQ(a[s][i].ended_by_eos, b[s][i].ended_by_eos) << "source " << s;
    }
  }
}

TEST(ConstrainedSearch, AConstraintThatAllowsEverythingChangesNothing) {
  const Distribution dist = random_table(3, kVocab);
  const RuleConstraint all(everything_in(kVocab));
  const std::vector<int64_t> max_lengths{4, 6, 1};
  for (int64_t beam : {1, 3, 5}) {
    SearchOptions options;
    options.beam_size = beam;
    options.n_best = beam;
    options.min_length = 1;
    TableScorer plain(kVocab, 3, beam, dist), constrained(kVocab, 3, beam, dist);
    if (beam == 1) {
      expect_identical(greedy_search(constrained, max_lengths, options, all.starts(3)),
                       greedy_search(plain, max_lengths, options));
    } else {
      expect_identical(beam_search(constrained, max_lengths, options, all.starts(3)),
                       beam_search(plain, max_lengths, options));
    }
  }
}

// An exhaustive beam (as wide as the allowed outputs) finds the brute-force n best of what the
// rule allows, for sources of different rules in one batch; narrower beams and greedy search
// return only allowed outputs. Hypotheses whose second word is 5 are dead ends that drop out.
TEST(ConstrainedSearch, BeamAndGreedyReturnOnlyAllowedSequencesAndTheBestOfThem) {
  const RuleConstraint rule(alternating);
  const std::vector<int64_t> max_lengths{8, 8, 8};
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const Distribution dist = random_table(seed, kVocab);
    SearchOptions options;
    options.alpha = 0.6;
    options.beam_size = 16;
    options.n_best = 4;
    TableScorer scorer(kVocab, 3, options.beam_size, dist);
    const auto found = beam_search(scorer, max_lengths, options, rule.starts(3));
    ASSERT_EQ(found.size(), 3u);
    for (int64_t s = 0; s < 3; ++s) {
      const std::vector<Hypothesis> want =
          allowed_outputs(dist, alternating, s, max_lengths[static_cast<size_t>(s)], 0.6);
      ASSERT_EQ(found[static_cast<size_t>(s)].size(), 4u) << "seed " << seed << " source " << s;
      for (size_t i = 0; i < 4; ++i) {
        const Hypothesis& got = found[static_cast<size_t>(s)][i];
        EXPECT_TRUE(follows(alternating, s, got)) << "seed " << seed << " source " << s;
        EXPECT_EQ(got.tokens, want[i].tokens) << "seed " << seed << " source " << s;
        EXPECT_NEAR(got.score, want[i].score, 1e-9);
      }
    }

    for (int64_t beam : {1, 2, 3}) {
      options.beam_size = beam;
      options.n_best = 1;
      TableScorer narrow(kVocab, 3, beam, dist);
      const auto got = beam == 1 ? greedy_search(narrow, max_lengths, options, rule.starts(3))
                                 : beam_search(narrow, max_lengths, options, rule.starts(3));
      for (int64_t s = 0; s < 3; ++s)
        for (const Hypothesis& h : got[static_cast<size_t>(s)])
          EXPECT_TRUE(follows(alternating, s, h)) << "beam " << beam << " source " << s;
    }
  }
}

// Every continuation of every hypothesis disallowed at once: the sources end with what they have
// finished (nothing), and the search returns normally; greedy the same.
TEST(ConstrainedSearch, HypothesesWithNothingAllowedDropOut) {
  const RuleConstraint dead_end([](int64_t source, const std::vector<int32_t>& prefix) {
    if (prefix.size() < 2) return std::vector<int32_t>{4, 5, 6};
    return source == 0 ? std::vector<int32_t>{} : std::vector<int32_t>{kEos};
  });
  SearchOptions options;
  options.beam_size = 4;
  options.n_best = 2;
  TableScorer scorer(kVocab, 2, 4, random_table(9, kVocab));
  const auto found = beam_search(scorer, {6, 6}, options, dead_end.starts(2));
  EXPECT_TRUE(found[0].empty());
  ASSERT_EQ(found[1].size(), 2u);
  for (const Hypothesis& h : found[1]) EXPECT_EQ(h.tokens.size(), 2u);

  options.beam_size = 1;
  options.n_best = 1;
  TableScorer greedy(kVocab, 2, 1, random_table(9, kVocab));
  const auto one = greedy_search(greedy, {6, 6}, options, dead_end.starts(2));
  EXPECT_TRUE(one[0].empty());
  ASSERT_EQ(one[1].size(), 1u);
  EXPECT_TRUE(follows(dead_end.rule(), 1, one[1][0]));
}

TEST(ConstrainedSearch, BadConstraintsAreErrors) {
  const RuleConstraint outside([](int64_t, const std::vector<int32_t>&) {
    return std::vector<int32_t>{4, 99};
  });
  SearchOptions options;
  TableScorer scorer(kVocab, 1, 4, random_table(1, kVocab));
  EXPECT_THROW(
      {
        try {
          beam_search(scorer, {5}, options, outside.starts(1));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("allows token 99, outside the vocabulary of 8"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  TableScorer two(kVocab, 2, 4, random_table(1, kVocab));
  EXPECT_THROW(beam_search(two, {5, 5}, options, outside.starts(1)), Error);

  // A +inf among the allowed log-probabilities is the model's overflow, named by step.
  TableScorer nan_scorer(kVocab, 1, 4, [](int64_t, const std::vector<int32_t>& prefix) {
    std::vector<double> p(kVocab, 0.2);
    if (prefix.size() == 1) p[4] = std::numeric_limits<double>::infinity();
    return p;
  });
  const RuleConstraint all(everything_in(kVocab));
  try {
    beam_search(nan_scorer, {5}, options, all.starts(1));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoding step 2"), std::string::npos) << e.what();
  }
}

// translate() on a tiny random Transformer: with a constraint that allows everything the outputs
// are those without one; under a rule each source (by its index in the input, whatever the
// batching's order) gets only its allowed outputs.
TEST(ConstrainedSearch, TranslateGivesEachSourceItsOwnConstraint) {
  const ModelConfig config = testing::tiny_decoder_config();
  nn::Transformer model(config);
  model.init(21);
  const auto sources =
      testing::random_sources({3, 9, 1, 5, 5, 2, 7}, static_cast<int32_t>(config.vocab_size), 22);
  for (int64_t beam : {1, 4}) {
    TranslateOptions options;
    options.beam_size = beam;
    options.n_best = beam;
    options.batch_size = 3;
    const auto plain = translate(model, sources, options);
    options.constraint = std::make_shared<RuleConstraint>(everything_in(config.vocab_size));
    const auto all = translate(model, sources, options);
    ASSERT_EQ(all.size(), plain.size());
    for (size_t s = 0; s < plain.size(); ++s) {
      ASSERT_EQ(all[s].size(), plain[s].size()) << "sentence " << s;
      for (size_t i = 0; i < plain[s].size(); ++i) {
        EXPECT_EQ(all[s][i].tokens, plain[s][i].tokens) << "sentence " << s;
        EXPECT_NEAR(all[s][i].score, plain[s][i].score, 1e-5) << "sentence " << s;
      }
    }

    // Source s writes only ids >= 20 and exactly 1 + s % 3 of them.
    const Rule rule = [](int64_t source, const std::vector<int32_t>& prefix) {
      if (static_cast<int64_t>(prefix.size()) == 1 + source % 3) return std::vector<int32_t>{kEos};
      std::vector<int32_t> high;
      for (int32_t t = 20; t < 40; ++t) high.push_back(t);
      return high;
    };
    options.constraint = std::make_shared<RuleConstraint>(rule);
    const auto ruled = translate(model, sources, options);
    for (size_t s = 0; s < ruled.size(); ++s) {
      ASSERT_EQ(ruled[s].size(), static_cast<size_t>(beam)) << "sentence " << s;
      for (const Hypothesis& h : ruled[s])
        EXPECT_TRUE(follows(rule, static_cast<int64_t>(s), h)) << "sentence " << s;
    }
  }
}

// A state that scores one token by a pool (ConstraintState::pooled): before the third token, 4 or
// 5, then eos. Token 4 stands for the choice of 4, 6 or 7 and scores log(p4 + p6 + p7); at the
// second step token 5 is certain and scores 0.
class PooledState final : public ConstraintState {
 public:
  std::unique_ptr<ConstraintState> clone() const override {
    return std::make_unique<PooledState>(*this);
  }
  void allowed(std::vector<int32_t>& tokens) const override {
    if (length_ < 3) tokens.insert(tokens.end(), {4, 5});
  }
  bool may_end() const override { return length_ == 3; }
  void advance(int32_t) override { ++length_; }
  Pooled pooled() const override {
    static const std::vector<int32_t> kLeaves{4, 6, 7};
    return length_ == 1 ? Pooled{5, nullptr} : Pooled{4, &kLeaves};
  }

 private:
  int64_t length_ = 0;
};

class PooledConstraint final : public Constraint {
 public:
  std::unique_ptr<ConstraintState> start(int64_t, int64_t) const override {
    return std::make_unique<PooledState>();
  }
};

// The brute force: every output of PooledState, its log-probability summed as the search does
// (each step's term rounded to float, as the search's log-probabilities are).
std::vector<std::pair<std::vector<int32_t>, double>> pooled_outputs(const Distribution& dist) {
  std::vector<std::pair<std::vector<int32_t>, double>> all;
  for (int code = 0; code < 8; ++code) {
    std::vector<int32_t> tokens;
    double log_prob = 0;
    for (int i = 0; i < 3; ++i) {
      const std::vector<double> p = dist(0, tokens);
      const int32_t t = (code >> i) & 1 ? 5 : 4;
      const double term = i == 1 ? (t == 5 ? 0.0 : std::log(p[4]))
                                 : (t == 4 ? std::log(p[4] + p[6] + p[7]) : std::log(p[5]));
      log_prob += static_cast<float>(term);
      tokens.push_back(t);
    }
    log_prob += static_cast<float>(std::log(dist(0, tokens)[kEos]));
    all.emplace_back(tokens, log_prob);
  }
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return all;
}

TEST(ConstrainedSearch, APooledTokenScoresTheTotalProbabilityOfItsPool) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const Distribution dist = random_table(seed, kVocab);
    const auto want = pooled_outputs(dist);
    const PooledConstraint constraint;
    SearchOptions options;
    options.beam_size = 8;
    options.n_best = 8;
    TableScorer scorer(kVocab, 1, options.beam_size, dist);
    std::vector<std::unique_ptr<ConstraintState>> starts;
    starts.push_back(constraint.start(0, 0));
    const auto found = beam_search(scorer, {6}, options, std::move(starts));
    ASSERT_EQ(found.size(), 1u);
    ASSERT_EQ(found[0].size(), 8u) << "seed " << seed;
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(found[0][i].tokens, want[i].first) << "seed " << seed << " rank " << i;
      EXPECT_NEAR(found[0][i].log_prob, want[i].second, 1e-5) << "seed " << seed << " rank " << i;
    }
  }
}

}  // namespace
}  // namespace tfm::internal::decode
