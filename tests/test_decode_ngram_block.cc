// N-gram blocking (SearchOptions::no_repeat_ngram, fairseq's --no-repeat-ngram-size): the blocked
// tokens by hand, the searches against the same rule written as a constraint that allows exactly
// the continuations repeating no n-gram (found by brute force, independently of the search's
// code), and translate() on a tiny random Transformer, whose outputs repeat n-grams without it.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>

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

// Whether some n-gram occurs twice in `tokens`.
bool repeats_ngram(const std::vector<int32_t>& tokens, int64_t n) {
  std::set<std::vector<int32_t>> seen;
  for (size_t i = 0; i + static_cast<size_t>(n) <= tokens.size(); ++i)
    if (!seen.insert({tokens.begin() + static_cast<int64_t>(i),
                      tokens.begin() + static_cast<int64_t>(i) + n})
             .second)
      return true;
  return false;
}

// The blocking rule as a constraint: eos always, a word when the prefix with it repeats no n-gram.
class NoRepeatState final : public ConstraintState {
 public:
  explicit NoRepeatState(int64_t n) : n_(n) {}
  std::unique_ptr<ConstraintState> clone() const override {
    return std::make_unique<NoRepeatState>(*this);
  }
  void allowed(std::vector<int32_t>& tokens) const override {
    std::vector<int32_t> longer = prefix_;
    longer.push_back(0);
    for (int32_t t = 0; t < kVocab; ++t) {
      if (t == kEos) continue;
      longer.back() = t;
      if (!repeats_ngram(longer, n_)) tokens.push_back(t);
    }
  }
  bool may_end() const override { return true; }
  void advance(int32_t token) override { prefix_.push_back(token); }

 private:
  int64_t n_;
  std::vector<int32_t> prefix_;
};

std::vector<std::unique_ptr<ConstraintState>> no_repeat_states(int64_t sources, int64_t n) {
  std::vector<std::unique_ptr<ConstraintState>> out;
  for (int64_t s = 0; s < sources; ++s) out.push_back(std::make_unique<NoRepeatState>(n));
  return out;
}

TEST(NgramBlocking, BlockedTokensByHand) {
  EXPECT_EQ(repeated_ngram_ends({}, 2), std::vector<int32_t>{});
  EXPECT_EQ(repeated_ngram_ends({5, 6, 5}, 1), (std::vector<int32_t>{5, 6}));
  // Last token 5: 6 and 7 followed an earlier 5.
  EXPECT_EQ(repeated_ngram_ends({5, 6, 5, 7, 4, 5}, 2), (std::vector<int32_t>{6, 7}));
  // Last two tokens (5, 6): 7 followed them once; (6, 5) and (5, 7) do not end the hypothesis.
  EXPECT_EQ(repeated_ngram_ends({5, 6, 7, 6, 5, 6}, 3), (std::vector<int32_t>{7}));
  EXPECT_EQ(repeated_ngram_ends({5, 6}, 3), std::vector<int32_t>{});
  EXPECT_EQ(repeated_ngram_ends({4, 4, 4}, 2), std::vector<int32_t>{4});
  EXPECT_THROW(repeated_ngram_ends({4}, 0), Error);
}

TEST(NgramBlocking, SearchesEqualTheRuleAsAConstraint) {
  const std::vector<int64_t> max_lengths = {9, 12, 7};
  const auto sources = static_cast<int64_t>(max_lengths.size());
  int blocked_somewhere = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u})
    for (int64_t n : {1, 2, 3})
      for (int64_t beam : {1, 2, 4}) {
        SearchOptions options;
        options.beam_size = beam;
        options.n_best = beam;
        options.alpha = 0.6;
        options.bos_id = testing::kBos;
        options.eos_id = kEos;
        const Distribution table = random_table(seed, kVocab, 0.2);
        auto search = [&](const SearchOptions& o,
                          std::vector<std::unique_ptr<ConstraintState>> states) {
          TableScorer scorer(kVocab, sources, beam, table);
          return beam == 1 ? greedy_search(scorer, max_lengths, o, std::move(states))
                           : beam_search(scorer, max_lengths, o, std::move(states));
        };
        const auto plain = search(options, {});
        const auto ruled = search(options, no_repeat_states(sources, n));
        options.no_repeat_ngram = n;
        const auto blocked = search(options, {});
        ASSERT_EQ(blocked.size(), ruled.size());
        for (size_t s = 0; s < ruled.size(); ++s) {
          const std::string where = "seed " + std::to_string(seed) + " n " + std::to_string(n) +
                                    " beam " + std::to_string(beam) + " source " +
                                    std::to_string(s);
          ASSERT_EQ(blocked[s].size(), ruled[s].size()) << where;
          for (size_t i = 0; i < ruled[s].size(); ++i) {
            EXPECT_EQ(blocked[s][i].tokens, ruled[s][i].tokens) << where;
            EXPECT_DOUBLE_EQ(blocked[s][i].score, ruled[s][i].score) << where;
            EXPECT_FALSE(repeats_ngram(blocked[s][i].tokens, n)) << where;
          }
          if (plain[s].front().tokens != blocked[s].front().tokens) ++blocked_somewhere;
        }
      }
  // The rule changed the best output of many searches: the comparison above is not vacuous.
  EXPECT_GT(blocked_somewhere, 20);
}

TEST(NgramBlocking, CombinesWithAConstraint) {
  // Blocking bigrams under a constraint that allows only words 4 and 5 (and eos): the outputs
  // equal those of the constraint that allows both rules' tokens at once.
  class OnlyFourFive final : public ConstraintState {
   public:
    std::unique_ptr<ConstraintState> clone() const override {
      return std::make_unique<OnlyFourFive>(*this);
    }
    void allowed(std::vector<int32_t>& tokens) const override {
      tokens.insert(tokens.end(), {4, 5});
    }
    bool may_end() const override { return true; }
    void advance(int32_t) override {}
  };
  class Both final : public ConstraintState {
   public:
    std::unique_ptr<ConstraintState> clone() const override {
      return std::make_unique<Both>(*this);
    }
    void allowed(std::vector<int32_t>& tokens) const override {
      std::vector<int32_t> words;
      rule_.allowed(words);
      for (int32_t t : words)
        if (t == 4 || t == 5) tokens.push_back(t);
    }
    bool may_end() const override { return true; }
    void advance(int32_t token) override { rule_.advance(token); }

   private:
    NoRepeatState rule_{2};
  };
  const std::vector<int64_t> max_lengths = {10, 10};
  SearchOptions options;
  options.beam_size = 3;
  options.n_best = 3;
  options.bos_id = testing::kBos;
  options.eos_id = kEos;
  std::vector<std::unique_ptr<ConstraintState>> four_five, both;
  for (int s = 0; s < 2; ++s) {
    four_five.push_back(std::make_unique<OnlyFourFive>());
    both.push_back(std::make_unique<Both>());
  }
  TableScorer a(kVocab, 2, 3, random_table(7, kVocab, 0.2)),
      b(kVocab, 2, 3, random_table(7, kVocab, 0.2));
  const auto expected = beam_search(a, max_lengths, options, std::move(both));
  options.no_repeat_ngram = 2;
  const auto got = beam_search(b, max_lengths, options, std::move(four_five));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].size(), expected[s].size());
    for (size_t i = 0; i < got[s].size(); ++i) EXPECT_EQ(got[s][i].tokens, expected[s][i].tokens);
  }
}

TEST(NgramBlocking, TranslateOutputsRepeatNoNgram) {
  const ModelConfig config = testing::tiny_decoder_config();
  nn::Transformer model(config);
  model.init(31);
  const auto sources =
      testing::random_sources({6, 9, 4}, static_cast<int32_t>(config.vocab_size), 32);
  for (int64_t beam : {1, 4}) {
    TranslateOptions options;
    options.beam_size = beam;
    options.max_length = 24;
    int repeating = 0;
    for (const auto& hypotheses : translate(model, sources, options))
      repeating += repeats_ngram(hypotheses.front().tokens, 2) ? 1 : 0;
    EXPECT_GT(repeating, 0) << "beam " << beam << ": the untrained model repeats no bigram";
    options.no_repeat_ngram = 2;
    for (const auto& hypotheses : translate(model, sources, options))
      EXPECT_FALSE(repeats_ngram(hypotheses.front().tokens, 2)) << "beam " << beam;
  }
  TranslateOptions bad;
  bad.no_repeat_ngram = -1;
  EXPECT_THROW(translate(model, sources, bad), Error);
}

}  // namespace
}  // namespace tfm::internal::decode
