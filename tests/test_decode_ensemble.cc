// Ensembles: the step of an EnsembleScorer against the mean of its members' probabilities computed
// in double; a beam search over it equals one over a single scorer of that mean distribution; an
// ensemble of one model twice translates as the model; errors for members that do not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "table_scorer.h"
#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/decode/ensemble_scorer.h"
#include "tfm/decode/translate.h"

namespace tfm::internal::decode {
namespace {

using testing::Distribution;
using testing::kBos;
using testing::random_table;
using testing::TableScorer;

constexpr int64_t kVocab = 9;

// p(t) = (p_a(t) + p_b(t)) / 2: what the ensemble of a and b should decode with.
Distribution mean_of(Distribution a, Distribution b) {
  return [a, b](int64_t source, const std::vector<int32_t>& prefix) {
    std::vector<double> p = a(source, prefix);
    const std::vector<double> q = b(source, prefix);
    for (size_t t = 0; t < p.size(); ++t) p[t] = (p[t] + q[t]) / 2;
    return p;
  };
}

std::unique_ptr<EnsembleScorer> ensemble_of(std::vector<Distribution> tables, int64_t sources,
                                            int64_t beam) {
  std::vector<std::unique_ptr<StepScorer>> members;
  for (auto& table : tables)
    members.push_back(std::make_unique<TableScorer>(kVocab, sources, beam, table));
  return std::make_unique<EnsembleScorer>(std::move(members));
}

TEST(EnsembleScorer, AStepIsTheLogOfTheMembersMeanProbability) {
  const Distribution a = random_table(1, kVocab), b = random_table(2, kVocab, 0.3);
  auto ensemble = ensemble_of({a, b}, 2, 1);
  const Tensor first = ensemble->step({kBos, kBos});
  ensemble->select({0, 1});
  const Tensor second = ensemble->step({5, 7});
  for (int64_t s = 0; s < 2; ++s) {
    const std::vector<int32_t> prefix{s == 0 ? 5 : 7};
    const std::vector<double> p0 = mean_of(a, b)(s, {}), p1 = mean_of(a, b)(s, prefix);
    // Tokens 0-2 (pad, unk, bos) have probability 0 in both members: -inf, not NaN.
    for (int64_t t = 0; t < kVocab; ++t) {
      const float got0 = first.data<float>()[s * kVocab + t];
      const float got1 = second.data<float>()[s * kVocab + t];
      if (p0[static_cast<size_t>(t)] == 0) {
        EXPECT_EQ(got0, -std::numeric_limits<float>::infinity()) << "token " << t;
        EXPECT_EQ(got1, -std::numeric_limits<float>::infinity()) << "token " << t;
        continue;
      }
      EXPECT_NEAR(got0, std::log(p0[static_cast<size_t>(t)]), 1e-6) << "source " << s;
      EXPECT_NEAR(got1, std::log(p1[static_cast<size_t>(t)]), 1e-6) << "source " << s;
    }
  }
}

// step_top computes only the tokens that can rank: the same tokens and values, in the same order,
// as the top of step()'s full rows, with eos excluded, and among equal values (a uniform member
// pair) the lower token first.
TEST(EnsembleScorer, StepTopIsTheTopOfTheFullStep) {
  const Distribution uniform = [](int64_t, const std::vector<int32_t>&) {
    std::vector<double> p(kVocab, 0.0);
    for (int64_t t = 3; t < kVocab; ++t) p[static_cast<size_t>(t)] = 1.0 / (kVocab - 3);
    return p;
  };
  // Nearly all of the mass on one token, the others 1e-12 (28 nats below): fewer tokens than m
  // within 16 nats of the best, so every token is a candidate.
  const auto peaked = [](int32_t token) -> Distribution {
    return [token](int64_t, const std::vector<int32_t>&) {
      std::vector<double> p(kVocab, 0.0);
      for (int64_t t = 3; t < kVocab; ++t)
        p[static_cast<size_t>(t)] = 1e-12 * static_cast<double>(t);
      p[static_cast<size_t>(token)] = 1.0;
      return p;
    };
  };
  for (const auto& tables :
       {std::vector<Distribution>{random_table(6, kVocab), random_table(7, kVocab, 0.2)},
        std::vector<Distribution>{random_table(8, kVocab), random_table(9, kVocab),
                                  random_table(10, kVocab, 3.0)},
        std::vector<Distribution>{uniform, uniform},
        std::vector<Distribution>{peaked(5), peaked(5)},
        std::vector<Distribution>{peaked(4), peaked(7)}}) {
    for (int64_t m : {1, 3, 6, 20}) {
      for (int32_t excluded : {-1, 3}) {
        auto full = ensemble_of(tables, 2, 1);
        auto top = ensemble_of(tables, 2, 1);
        const Tensor rows = full->step({kBos, kBos});
        StepTop want, got;
        want.assign(ops::top_k(rows, m, excluded), 2);
        top->step_top({kBos, kBos}, m, excluded, got);
        EXPECT_EQ(got.counts, want.counts) << "m " << m << ", excluded " << excluded;
        // Only a row's first counts[r] entries are defined.
        for (int64_t r = 0; r < 2; ++r) {
          for (int32_t i = 0; i < std::min(got.counts[r], want.counts[r]); ++i) {
            EXPECT_EQ(got.tokens[r * got.m + i], want.tokens[r * want.m + i]) << "m " << m;
            EXPECT_EQ(got.log_probs[r * got.m + i], want.log_probs[r * want.m + i]) << "m " << m;
          }
        }
      }
    }
  }
}

TEST(EnsembleScorer, BeamSearchDecodesTheMeanDistribution) {
  const Distribution a = random_table(3, kVocab), b = random_table(4, kVocab, 0.5);
  SearchOptions options;
  options.beam_size = 3;
  options.n_best = 3;
  const std::vector<int64_t> max_lengths{4, 6, 5};
  auto ensemble = ensemble_of({a, b}, 3, options.beam_size);
  TableScorer mean(kVocab, 3, options.beam_size, mean_of(a, b));
  const auto got = beam_search(*ensemble, max_lengths, options);
  const auto want = beam_search(mean, max_lengths, options);
  // The members decode differently from their mean (else this would not test the mean).
  TableScorer alone(kVocab, 3, options.beam_size, a);
  const auto of_a = beam_search(alone, max_lengths, options);
  bool differs = false;
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    for (size_t i = 0; i < got[s].size(); ++i) {
      EXPECT_EQ(got[s][i].tokens, want[s][i].tokens) << "source " << s << ", hypothesis " << i;
      EXPECT_NEAR(got[s][i].log_prob, want[s][i].log_prob, 1e-5);
      differs = differs || got[s][i].tokens != of_a[s][i].tokens;
    }
  }
  EXPECT_TRUE(differs);
}

TEST(EnsembleScorer, MembersThatDoNotFitAreErrors) {
  std::vector<std::unique_ptr<StepScorer>> members;
  testing::expect_error([&] { EnsembleScorer none(std::move(members)); }, {"no models"});
  members.push_back(std::make_unique<TableScorer>(kVocab, 2, 1, random_table(1, kVocab)));
  members.push_back(std::make_unique<TableScorer>(kVocab + 1, 2, 1, random_table(1, kVocab + 1)));
  testing::expect_error([&] { EnsembleScorer mixed(std::move(members)); },
                        {"ensemble", "2 rows of 10 tokens", "2 rows of 9"});
}

// A member whose log-probabilities hold a NaN: an error naming the step, not a silent output.
class NanScorer final : public StepScorer {
 public:
  int64_t rows() const override { return 1; }
  int64_t vocab_size() const override { return kVocab; }
  Tensor step(const std::vector<int32_t>&) override {
    std::vector<float> row(kVocab, std::log(1.0F / kVocab));
    if (++steps_ == 2) row[4] = std::numeric_limits<float>::quiet_NaN();
    return Tensor::from_floats({1, kVocab}, row);
  }
  void select(const std::vector<int64_t>&) override {}

 private:
  int steps_ = 0;
};

TEST(EnsembleScorer, ANonFiniteMemberIsAnErrorNamingTheStep) {
  std::vector<std::unique_ptr<StepScorer>> members;
  members.push_back(std::make_unique<NanScorer>());
  members.push_back(std::make_unique<TableScorer>(kVocab, 1, 1, random_table(5, kVocab, 0.01)));
  EnsembleScorer ensemble(std::move(members));
  SearchOptions options;
  options.beam_size = 1;
  testing::expect_error([&] { greedy_search(ensemble, {6}, options); },
                        {"decoding step 2", "not finite"});
}

class EnsembleTranslate : public ::testing::Test {
 protected:
  EnsembleTranslate()
      : config_(testing::tiny_decoder_config()), model_a_(config_), model_b_(config_) {
    model_a_.init(31);
    model_b_.init(32);
    sources_ = testing::random_sources({4, 7, 2, 5}, static_cast<int32_t>(config_.vocab_size), 33);
  }
  ModelConfig config_;
  nn::Transformer model_a_, model_b_;
  std::vector<std::vector<int32_t>> sources_;
};

// One model twice: the mean of equal probabilities is the model's own distribution, so the same
// outputs; two models: outputs of neither alone.
TEST_F(EnsembleTranslate, OneModelTwiceTranslatesAsTheModel) {
  const InferenceModel a(model_a_, {}), b(model_b_, {});
  TranslateOptions options;
  options.max_length_offset = 6;
  const auto alone = translate(a, sources_, options);
  const auto twice = translate(std::vector<const InferenceModel*>{&a, &a}, sources_, options);
  const auto both = translate(std::vector<const InferenceModel*>{&a, &b}, sources_, options);
  const auto of_b = translate(b, sources_, options);
  ASSERT_EQ(alone.size(), twice.size());
  bool differs = false;
  for (size_t s = 0; s < alone.size(); ++s) {
    EXPECT_EQ(twice[s][0].tokens, alone[s][0].tokens) << "sentence " << s;
    EXPECT_NEAR(twice[s][0].log_prob, alone[s][0].log_prob, 1e-4) << "sentence " << s;
    differs = differs ||
              (both[s][0].tokens != alone[s][0].tokens && both[s][0].tokens != of_b[s][0].tokens);
  }
  EXPECT_TRUE(differs);
}

TEST_F(EnsembleTranslate, ModelsThatDoNotShareTheVocabularyAreErrors) {
  ModelConfig wider = config_;
  wider.vocab_size += 1;
  nn::Transformer other(wider);
  other.init(34);
  const InferenceModel a(model_a_, {}), c(other, {});
  testing::expect_error(
      [&] {
        translate(std::vector<const InferenceModel*>{&a, &c}, sources_, {});
      },
      {"ensemble: model 2 has 41 tokens", "one vocabulary"});
  TranslateOptions probed;
  probed.attention = {0, -1};
  testing::expect_error(
      [&] {
        translate(std::vector<const InferenceModel*>{&a, &a}, sources_, probed);
      },
      {"attention", "ensemble"});
}

}  // namespace
}  // namespace tfm::internal::decode
