// decode::score (teacher-forced log-probabilities) against the incremental decoder of the searches:
// a greedy output of a fixed length, scored again, has the log-probability the search summed.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/decode/score.h"
#include "tfm/decode/translate.h"

namespace tfm::internal::decode {
namespace {

using testing::random_sources;
using testing::tiny_decoder_config;

class Score : public ::testing::Test {
 protected:
  Score() : config_(tiny_decoder_config()), model_(config_) {
    model_.init(31);
    inference_ = std::make_shared<const InferenceModel>(model_, InferenceOptions{});
    sources_ = random_sources({4, 1, 7, 3}, static_cast<int32_t>(config_.vocab_size), 32);
  }
  ModelConfig config_;
  nn::Transformer model_;
  std::shared_ptr<const InferenceModel> inference_;  // model_, f32
  std::vector<std::vector<int32_t>> sources_;
};

TEST_F(Score, GreedyOutputsScoreAsTheSearchSummedThem) {
  // Greedy search forced to 6 tokens (eos forbidden, cut at the maximum): each hypothesis's
  // log_prob is the sum of log p of its 6 tokens, computed step by step with the cache.
  TranslateOptions options;
  options.beam_size = 1;
  options.min_length = options.max_length = 6;
  const auto found = translate(model_, sources_, options);
  std::vector<std::vector<int32_t>> targets;
  for (const auto& nbest : found) targets.push_back(nbest.at(0).tokens);
  for (int64_t batch : {1, 3}) {
    ScoreOptions score_options;
    score_options.batch_size = batch;  // targets of equal length, sources padded differently
    const auto scores = score(*inference_, sources_, targets, score_options);
    ASSERT_EQ(scores.size(), sources_.size());
    for (size_t i = 0; i < scores.size(); ++i) {
      ASSERT_EQ(scores[i].token_log_probs.size(), 7u);  // 6 tokens and eos
      double first_six = 0, all = 0;
      for (size_t t = 0; t < 7; ++t) {
        EXPECT_LE(scores[i].token_log_probs[t], 0.0f);
        if (t < 6) first_six += scores[i].token_log_probs[t];
        all += scores[i].token_log_probs[t];
      }
      EXPECT_NEAR(first_six, found[i][0].log_prob, 1e-4) << "sentence " << i;
      EXPECT_NEAR(scores[i].log_prob, all, 1e-4);
    }
  }
}

TEST_F(Score, TargetsOfDifferentLengthsInOneBatchScoreAsAlone) {
  const std::vector<std::vector<int32_t>> targets{{5, 6, 7}, {}, {9, 9, 9, 9, 9, 9, 9, 9}, {4}};
  const auto together = score(*inference_, sources_, targets);
  for (size_t i = 0; i < sources_.size(); ++i) {
    const auto alone = score(*inference_, {sources_[i]}, {targets[i]});
    ASSERT_EQ(together[i].token_log_probs.size(), targets[i].size() + 1);
    for (size_t t = 0; t < targets[i].size() + 1; ++t)
      EXPECT_NEAR(together[i].token_log_probs[t], alone[0].token_log_probs[t], 1e-5)
          << "sentence " << i << ", token " << t;
  }
}

TEST_F(Score, BadInputsAreErrorsNamingTheSentence) {
  testing::expect_error([&] { score(*inference_, sources_, {{5}}); }, {"4 sources but 1 targets"});
  testing::expect_error(
      [&] {
        score(*inference_, {{5}, {}}, {{5}, {6}});
      },
      {"source sentence 1 is empty"});
  const auto vocab = static_cast<int32_t>(config_.vocab_size);
  testing::expect_error(
      [&] {
        score(*inference_, {{5}}, {{5, vocab}});
      },
      {"target sentence 0", "outside the vocabulary"});
  ModelConfig learned_config = tiny_decoder_config("post", "learned");
  nn::Transformer learned(learned_config);
  learned.init(3);
  const std::vector<int32_t> long_target(static_cast<size_t>(learned_config.max_positions), 5);
  testing::expect_error([&] { score(InferenceModel(learned, {}), {{5}}, {long_target}); },
                        {"target sentence 0", "learned position table"});
}

// Weights x 1e30 overflow the activations: score gave NaN log-probabilities (Python's score_batch
// all-NaN); it is an error naming the sentence and the token.
TEST_F(Score, AnOverflowingModelIsAnError) {
  nn::Transformer overflowing(config_);
  overflowing.init(31);
  for (const Tensor& p : overflowing.parameters()) {
    float* x = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) x[i] *= 1e30f;
  }
  for (const bool int8 : {false, true}) {
    const InferenceModel packed(overflowing, {DType::f32, Device::cpu, int8});
    testing::expect_error(
        [&] {
          score(packed, sources_, {{5}, {6}, {7}, {8}});
        },
        {"score: sentence 0, target token 1: the model's log-probability is not finite",
         "activations overflow"});
  }
}

}  // namespace
}  // namespace tfm::internal::decode
