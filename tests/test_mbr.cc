// Minimum Bayes risk choice (eval/mbr.h): the utility is sacreBLEU's sentence BLEU with add-1
// smoothing, the expected utility the score-weighted sum over the list, and the choice the
// candidate the list agrees with, or the model's best as the temperature goes to 0.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "data_test_util.h"
#include "tfm/core/error.h"
#include "tfm/data/vocab.h"
#include "tfm/eval/bleu.h"
#include "tfm/eval/mbr.h"

namespace tfm::internal::eval {
namespace {

TEST(Mbr, UtilityIsSentenceBleuWithAddOneSmoothing) {
  // "the cat sat" begins a reference of 8 tokens: every n-gram of the hypothesis matches (orders
  // 2-4 as (c + 1) / (t + 1) = 1, the 4-grams' too: 1 / 1), so BLEU is the brevity penalty.
  EXPECT_NEAR(mbr_utility("the cat sat", "the cat sat on the red mat."), std::exp(1.0 - 8.0 / 3.0),
              1e-12);
  BleuOptions add_one;
  add_one.smoothing = BleuSmoothing::kAddK;
  for (const auto& [h, r] : std::vector<std::pair<std::string, std::string>>{
           {"Ein Mann, der läuft.", "Ein Mann läuft im Park."},
           {"Zwei Hunde spielen (im Schnee)!", "Zwei Hunde spielen im Schnee."},
           {"Ein Kind.", "Ein Kind springt ins Wasser."},
           {"A dog", "A cat"}}) {
    EXPECT_DOUBLE_EQ(mbr_utility(h, r), sentence_bleu(h, {r}, add_one).score / 100.0) << h;
    EXPECT_GT(mbr_utility(h, r), 0.0) << h;
    EXPECT_LT(mbr_utility(h, r), 1.0) << h;
    EXPECT_NEAR(mbr_utility(h, h), 1.0, 1e-12) << h;
  }
  EXPECT_EQ(mbr_utility("", "Ein Kind."), 0.0);
  EXPECT_EQ(mbr_utility("Ein Kind.", ""), 0.0);
  EXPECT_EQ(mbr_utility("Hunde", "Ein Kind."), 0.0);  // no unigram matches
}

TEST(Mbr, ExpectedUtilityIsTheScoreWeightedSum) {
  const std::vector<std::string> texts = {"Ein Mann läuft.", "Ein Mann läuft im Park.",
                                          "Eine Frau sitzt."};
  const std::vector<double> scores = {-0.5, -0.7, -2.0};
  const double temperature = 0.8;
  const std::vector<double> expected = mbr_expected_utilities(texts, scores, {temperature});
  ASSERT_EQ(expected.size(), texts.size());
  double total = 0;
  std::vector<double> w;
  for (double s : scores) total += w.emplace_back(std::exp(s / temperature));
  for (size_t i = 0; i < texts.size(); ++i) {
    double sum = 0;
    for (size_t j = 0; j < texts.size(); ++j) sum += w[j] / total * mbr_utility(texts[i], texts[j]);
    EXPECT_NEAR(expected[i], sum, 1e-12) << i;
  }
  // Scores far below zero weigh the same after the largest is subtracted: no underflow to 0/0.
  const std::vector<double> shifted =
      mbr_expected_utilities(texts, {-1000.5, -1000.7, -1002.0}, {temperature});
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_NEAR(shifted[i], expected[i], 1e-12) << i;
}

// Each candidate is counted once and compared by its n-gram counts: the same utilities as
// sentence_bleu of the raw texts, with repeated n-grams clipped, with empty and one-token
// candidates, and for a list of more distinct tokens than the counts can number (65535), which is
// compared text by text instead.
TEST(Mbr, CountedComparisonsEqualSentenceBleu) {
  const auto check = [](const std::vector<std::string>& texts) {
    std::vector<double> scores;
    for (size_t i = 0; i < texts.size(); ++i) scores.push_back(-0.3 * static_cast<double>(i));
    const std::vector<double> expected = mbr_expected_utilities(texts, scores);
    double total = 0;
    for (double s : scores) total += std::exp(s);
    for (size_t i = 0; i < texts.size(); ++i) {
      double sum = 0;
      for (size_t j = 0; j < texts.size(); ++j)
        sum += std::exp(scores[j]) / total * mbr_utility(texts[i], texts[j]);
      EXPECT_NEAR(expected[i], sum, 1e-12) << texts[i];
    }
  };
  check({"der der der Hund , der Hund .", "der Hund der Hund .", "Hund", "", "der der",
         "Ein Hund (der) läuft: \"hier\"!", "Ein Hund läuft hier."});
  std::string many;
  for (int i = 0; i < 65600; ++i) many += fmt::format("w{} ", i);
  check({many, "w1 w2 w3 w5"});
}

TEST(Mbr, ChoosesWhatTheListAgreesOnAndTheModelsBestAsTheTemperatureFalls) {
  // The model's best is an outlier; the other three agree with each other.
  const std::vector<std::string> texts = {"Eine Katze schläft.", "Ein Hund läuft im Park.",
                                          "Ein Hund rennt im Park.", "Ein Hund läuft im Garten."};
  const std::vector<double> scores = {-0.40, -0.45, -0.60, -0.65};
  EXPECT_EQ(mbr_choice(texts, scores), 1u);
  EXPECT_EQ(mbr_choice(texts, scores, {1e-4}), 0u);
  // Equal texts have equal expected utilities: the first of them is chosen.
  EXPECT_EQ(mbr_choice({"Ein Hund.", "Ein Hund."}, {-1.0, -1.0}), 0u);
  EXPECT_EQ(mbr_choice({"Ein Hund."}, {-1.0}), 0u);
}

TEST(Mbr, RefusesWhatItCannotWeigh) {
  const auto message_of = [](auto call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(message_of([] { mbr_choice({}, {}); }), "MBR: no candidates");
  EXPECT_EQ(message_of([] { mbr_choice({"a", "b"}, {-1.0}); }), "MBR: 2 candidates but 1 scores");
  EXPECT_EQ(message_of([&] {
              mbr_choice({"a", "b"}, {-1.0, -inf});
            }),
            "MBR: candidate 2 has the score -inf");
  EXPECT_EQ(message_of([] {
              mbr_choice({"a", "b"}, {-1.0, std::nan("")});
            }),
            "MBR: candidate 2 has the score nan");
  for (double t : {0.0, -1.0, inf, std::nan("")})
    EXPECT_NE(message_of([&] {
                mbr_choice({"a", "b"}, {-1.0, -2.0}, {t});
              }).find("MBR: the temperature must be a positive number"),
              std::string::npos)
        << t;
  EXPECT_NE(message_of([] { mbr_choice({"a", std::string("\xff")}, {-1.0, -2.0}); }), "no error");
}

// The lists' texts are the vocabulary's detokenized hypotheses; the choice moves to the front and
// the rest keep their order; lists of 0 or 1 hypotheses stay as they are.
TEST(Mbr, ChoosesFromNBestListsDetokenizedByTheVocabulary) {
  testing::TempDir dir;
  const data::Vocabulary vocab(testing::train_tiny_vocab(dir));
  auto hypothesis = [&](const std::string& text, double score) {
    decode::Hypothesis h;
    h.tokens = vocab.encode(text);
    h.score = score;
    h.length = static_cast<int64_t>(h.tokens.size()) + 1;
    h.ended_by_eos = true;
    return h;
  };
  // The model's best is the odd one out.
  const std::vector<std::string> texts = {
      "a man is running in the park.", "the dog is running in the park.",
      "the dog is running in the street.", "the dog is running in the park with a ball."};
  const std::vector<double> scores = {-0.40, -0.42, -0.55, -0.60};
  translation::NBest list;
  for (size_t i = 0; i < texts.size(); ++i) list.push_back(hypothesis(texts[i], scores[i]));
  std::vector<translation::NBest> lists = {list, {}, {hypothesis("a man.", -1.0)}};
  const size_t chosen = mbr_choice(texts, scores);
  EXPECT_NE(chosen, 0u);
  choose_by_mbr(vocab, lists);
  ASSERT_EQ(lists[0].size(), texts.size());
  std::vector<std::string> order = {texts[chosen]};
  for (size_t i = 0; i < texts.size(); ++i)
    if (i != chosen) order.push_back(texts[i]);
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(translation::hypothesis_text(vocab, lists[0][i]), order[i]) << i;
  EXPECT_TRUE(lists[1].empty());
  ASSERT_EQ(lists[2].size(), 1u);
  EXPECT_EQ(translation::hypothesis_text(vocab, lists[2][0]), "a man.");
}

TEST(Mbr, UniformWeightsCountEverySampleTheSame) {
  const std::vector<std::string> texts = {"a b c d", "a b c e", "x y z w", "a b c d"};
  MbrOptions uniform;
  uniform.uniform = true;
  const std::vector<double> expected = mbr_expected_utilities(texts, {-1, -9, -0.1, -5}, uniform);
  for (size_t i = 0; i < texts.size(); ++i) {
    double mean = 0;
    for (const std::string& r : texts) mean += mbr_utility(texts[i], r) / 4;
    EXPECT_NEAR(expected[i], mean, 1e-12) << i;
  }
  // The scores do not matter: the sample drawn twice wins.
  EXPECT_EQ(mbr_choice(texts, {-1, -9, -0.1, -5}, uniform), 0u);
  EXPECT_EQ(mbr_choice(texts, {-9, -1, -0.1, -5}, uniform), 0u);
}

}  // namespace
}  // namespace tfm::internal::eval
