// The public API (include/tfm) as an outside program uses it: only <tfm/...> headers. Trains a
// tiny model, loads it, translates, scores, computes BLEU, and checks the errors callers get.
#include <gtest/gtest.h>
#include <tfm/tfm.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "public_api_test_util.h"

namespace {

namespace fs = std::filesystem;

// One tiny model for every test: 8 updates of a 1-layer model through tfm::train.
class PublicApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tfm_public_api_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    result_ = tfm::internal::testing::train_api_model(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static fs::path dir_;
  static tfm::TrainingResult result_;
};

fs::path PublicApi::dir_;
tfm::TrainingResult PublicApi::result_;

TEST_F(PublicApi, TrainsIntoARunDirectoryWhoseCheckpointLoads) {
  EXPECT_EQ(result_.steps, 8);
  EXPECT_FALSE(result_.interrupted);
  ASSERT_TRUE(fs::exists(result_.last_checkpoint / "model.safetensors"));
  const auto model = tfm::Model::load(result_.last_checkpoint);
  EXPECT_EQ(model->precision(), "f32");
  EXPECT_EQ(model->device(), "cpu");
  EXPECT_EQ(model->layers(), 1);
  EXPECT_EQ(model->decoder_layers(), 1);
  EXPECT_EQ(model->d_model(), 16);
  EXPECT_EQ(model->vocab_size(), 60);
  EXPECT_GT(model->parameter_count(), 60 * 16);
}

TEST_F(PublicApi, TranslatesNBestInInputOrderWithEmptyLinesKept) {
  tfm::Translator translator(tfm::Model::load(result_.last_checkpoint), {1});
  tfm::TranslationOptions options;
  options.beam_size = 3;
  options.n_best = 2;
  options.max_length = 6;
  const std::vector<std::string> sources{"a man runs in the park.", "", "two girls play."};
  const auto results = translator.translate(sources, options);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[1].hypotheses.empty());
  for (size_t i : {0u, 2u}) {
    ASSERT_EQ(results[i].hypotheses.size(), 2u);
    EXPECT_GE(results[i].hypotheses[0].score, results[i].hypotheses[1].score);
    for (const auto& h : results[i].hypotheses) {
      EXPECT_LE(h.log_prob, 0.0);
      EXPECT_LE(h.tokens.size(), 6u);
    }
    // Each sentence alone gives the same translation as in the batch.
    const auto alone = translator.translate({sources[i]}, options);
    EXPECT_EQ(alone[0].hypotheses[0].text, results[i].hypotheses[0].text);
    EXPECT_NEAR(alone[0].hypotheses[0].score, results[i].hypotheses[0].score, 1e-5);
  }
}

// With mbr the n-best list is the search's, its minimum Bayes risk choice first: the hypothesis
// h_i with the highest sum_j w_j BLEU(h_i, h_j), w = softmax(score / T), computed here with
// tfm::corpus_bleu over one sentence with add-1 smoothing (docs/DECODING.md).
TEST_F(PublicApi, MbrPutsTheListsMinimumBayesRiskChoiceFirst) {
  // The suite's model of 8 updates writes one word a sentence, no two sharing a 13a token, so the
  // choice would always be the model's best: this one is trained for 400 updates to copy its
  // input, far enough that its n-best lists share words, not so far that they agree with its best.
  tfm::TrainingOptions training;
  training.recipe = tfm::internal::testing::write_api_recipe(dir_ / "mbr");
  fs::copy_file(dir_ / "mbr" / "en.txt", dir_ / "mbr" / "de.txt",
                fs::copy_options::overwrite_existing);
  training.run_dir = dir_ / "mbr" / "run";
  training.max_steps = 400;
  training.device = tfm::ComputeDevice::cpu;
  tfm::Translator translator(tfm::Model::load(tfm::train(training).last_checkpoint), {1});
  tfm::TranslationOptions options;
  options.beam_size = 8;
  options.n_best = 8;
  options.max_length = 8;
  const std::vector<std::string> sources{"a man runs in the park.", "two girls play red ball.",
                                         "the dog runs.", "a red ball in the park.",
                                         "two men play in the park."};
  const auto plain = translator.translate(sources, options);
  tfm::BleuOptions add_one;
  add_one.smooth = "add-k";
  int moved = 0;
  for (const double temperature : {1.0, 16.0}) {
    options.mbr = true;
    options.mbr_temperature = temperature;
    const auto chosen = translator.translate(sources, options);
    ASSERT_EQ(chosen.size(), sources.size());
    for (size_t s = 0; s < sources.size(); ++s) {
      const auto& list = plain[s].hypotheses;
      ASSERT_EQ(list.size(), 8u);
      double top = -1e300, total = 0;
      for (const auto& h : list) top = std::max(top, h.score / temperature);
      std::vector<double> weights;
      for (const auto& h : list)
        total += weights.emplace_back(std::exp(h.score / temperature - top));
      size_t best = 0;
      double best_utility = -1;
      for (size_t i = 0; i < list.size(); ++i) {
        double utility = 0;
        for (size_t j = 0; j < list.size(); ++j)
          utility += weights[j] / total *
                     tfm::corpus_bleu({list[i].text}, {{list[j].text}}, add_one).score / 100;
        if (utility > best_utility + 1e-12) {  // the first of equals, as the search orders them
          best_utility = utility;
          best = i;
        }
      }
      // The choice first, then the others in the search's order, scores unchanged.
      std::vector<size_t> order{best};
      for (size_t i = 0; i < list.size(); ++i)
        if (i != best) order.push_back(i);
      ASSERT_EQ(chosen[s].hypotheses.size(), list.size());
      for (size_t k = 0; k < order.size(); ++k) {
        EXPECT_EQ(chosen[s].hypotheses[k].text, list[order[k]].text) << s << " " << k;
        EXPECT_NEAR(chosen[s].hypotheses[k].score, list[order[k]].score, 1e-6);
      }
      moved += best != 0;
    }
  }
  EXPECT_GT(moved, 0) << "MBR chose the search's first every time: the test shows nothing";
}

TEST_F(PublicApi, TwoTranslatorsOnOneModelInTwoThreadsGiveTheResultsOfOne) {
  const auto model = tfm::Model::load(result_.last_checkpoint);
  const std::vector<std::string> sources{"the dog runs.", "a red ball in the park."};
  tfm::TranslationOptions options;
  options.max_length = 8;
  const auto expected = tfm::Translator(model).translate(sources, options);
  std::vector<std::vector<tfm::TranslationResult>> got(2);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back(
        [&, t] { got[t] = tfm::Translator(model, {1}).translate(sources, options); });
  for (auto& thread : threads) thread.join();
  for (const auto& results : got)
    for (size_t i = 0; i < sources.size(); ++i) {
      EXPECT_EQ(results[i].hypotheses[0].text, expected[i].hypotheses[0].text);
      EXPECT_EQ(results[i].hypotheses[0].score, expected[i].hypotheses[0].score);
    }
}

TEST_F(PublicApi, ScoresTargetsTokenByToken) {
  tfm::Translator translator(tfm::Model::load(result_.last_checkpoint));
  const std::vector<std::string> sources{"a man runs.", "two girls play in the park."};
  const std::vector<std::string> targets{"ein mann läuft.", "zwei mädchen spielen im park."};
  const auto scores = translator.score(sources, targets);
  ASSERT_EQ(scores.size(), 2u);
  for (size_t i = 0; i < scores.size(); ++i) {
    ASSERT_EQ(scores[i].tokens.size(), scores[i].token_log_probs.size());
    ASSERT_GE(scores[i].tokens.size(), 2u);
    EXPECT_EQ(scores[i].tokens.back(), "</s>");
    double sum = 0;
    for (float lp : scores[i].token_log_probs) {
      EXPECT_LE(lp, 0.0f);
      sum += lp;
    }
    EXPECT_NEAR(scores[i].log_prob, sum, 1e-4);
    // A pair scores the same alone as in a batch of two.
    EXPECT_NEAR(translator.score({sources[i]}, {targets[i]}, 1)[0].log_prob, scores[i].log_prob,
                1e-4);
  }
}

TEST(PublicApiTrain, BudgetsThatAreNotNumbersOrNegativeAreErrors) {
  // Issue 43 D13: NaN, -2 and -5 were dropped silently (a run with no limit).
  const std::function<void(tfm::TrainingOptions&)> edits[] = {
      [](tfm::TrainingOptions& o) { o.max_minutes = std::nan(""); },
      [](tfm::TrainingOptions& o) { o.max_minutes = -5; },
      [](tfm::TrainingOptions& o) { o.max_minutes = INFINITY; },
      [](tfm::TrainingOptions& o) { o.max_steps = -2; },
      [](tfm::TrainingOptions& o) { o.threads = -7; }};
  for (const auto& edit : edits) {
    tfm::TrainingOptions options;
    edit(options);
    try {
      tfm::train(options);
      ADD_FAILURE() << "accepted";
    } catch (const tfm::Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("must be"), std::string::npos) << message;
      EXPECT_NE(message.find("(or -1: the recipe's)"), std::string::npos) << message;
    }
  }
}

TEST(PublicApiBleu, MatchesSacrebleuWithItsSignature) {
  // Precisions 5/6, 3/5, 1/4 and, exp smoothing for the first zero order, 1/(2 * 3); BP 1:
  // BLEU = 100 (5/6 * 3/5 * 1/4 * 1/6)^(1/4) = 37.9917842...
  const auto bleu = tfm::corpus_bleu({"the cat sat on the mat"}, {{"the cat is on the mat"}});
  EXPECT_NEAR(bleu.score, 37.99178428257963, 1e-9);
  EXPECT_EQ(bleu.signature, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  EXPECT_EQ(bleu.hypothesis_length, 6);
  EXPECT_EQ(bleu.precisions.size(), 4u);
  EXPECT_NE(bleu.line.find("BLEU|nrefs:1"), std::string::npos) << bleu.line;
  EXPECT_THROW(tfm::corpus_bleu({"a"}, {{"a"}}, {"14b", false, "exp"}), tfm::Error);
}

TEST(PublicApiBleu, ThePapersTokenizedBleu) {
  // tokenize "moses" + split_compounds: the EN-DE number (the arithmetic is in test_bleu_moses.cc).
  tfm::BleuOptions options;
  options.tokenize = "moses";
  options.smooth = "none";
  options.language = "de";
  options.split_compounds = true;
  const auto bleu = tfm::corpus_bleu({"Die Anti-Terror-Gesetze gelten seit 1. Mai."},
                                     {{"Die Anti-Terror-Gesetze gelten ab 1. Mai."}}, options);
  EXPECT_NEAR(bleu.score, 70.16879391277371, 1e-9);
  EXPECT_EQ(bleu.signature,
            "nrefs:1|case:mixed|eff:no|tok:moses-de|split:compounds|smooth:none|"
            "bleu:multi-bleu.perl");
  EXPECT_EQ(bleu.line,
            "BLEU|" + bleu.signature +
                " = 70.17, 90.9/80.0/66.7/50.0 (BP=1.000, ratio=1.000, hyp_len=11, ref_len=11)");
  options.language = "it";
  EXPECT_THROW(tfm::corpus_bleu({"a"}, {{"a"}}, options), tfm::Error);
  options.language = "de";
  options.smooth = "exp";  // multi-bleu.perl has no smoothing
  EXPECT_THROW(tfm::corpus_bleu({"a"}, {{"a"}}, options), tfm::Error);
}

// What a caller can get wrong is a tfm::Error with a one-line message naming the problem.
void expect_error(const std::function<void()>& call, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const tfm::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(part), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(PublicApi, ErrorsNameTheProblem) {
  expect_error([] { tfm::Model::load(dir_ / "no-such-model"); }, "does not exist");
  // The option names are parsed into enums (tfm/options.h): an unknown one is an error naming it.
  expect_error([] { tfm::parse_precision("fp16"); }, "precision: 'fp16' is not a precision");
  expect_error([] { tfm::parse_device("tpu"); }, "unknown device 'tpu'");
  EXPECT_EQ(tfm::parse_precision("int8-bf16"), tfm::Precision::int8_bf16);
  EXPECT_EQ(tfm::parse_device("gpu"), tfm::ComputeDevice::cuda);
  for (const auto precision : {tfm::Precision::f32, tfm::Precision::bf16, tfm::Precision::automatic,
                               tfm::Precision::int8, tfm::Precision::int8_bf16})
    EXPECT_EQ(tfm::parse_precision(tfm::to_string(precision)), precision);
  for (const auto device :
       {tfm::ComputeDevice::cpu, tfm::ComputeDevice::cuda, tfm::ComputeDevice::automatic})
    EXPECT_EQ(tfm::parse_device(tfm::to_string(device)), device);
  tfm::Translator translator(tfm::Model::load(result_.last_checkpoint));
  tfm::TranslationOptions options;
  options.n_best = 5;  // more than the beam of 4
  expect_error([&] { translator.translate({"a dog."}, options); }, "n_best 5");
  options.n_best = 1;
  options.mbr = true;
  expect_error([&] { translator.translate({"a dog."}, options); },
               "mbr chooses from the n_best list: give it at least 2 hypotheses");
  options.n_best = 4;
  options.mbr_temperature = 0;
  expect_error([&] { translator.translate({"a dog."}, options); },
               "mbr_temperature 0 must be a positive finite number");
  expect_error(
      [&] {
        translator.score({"a dog.", "a man."}, {"ein hund."});
      },
      "2 sources but 1 targets");
}

}  // namespace
