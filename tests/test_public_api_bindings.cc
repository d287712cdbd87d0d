// The public API that the Python bindings (python/) stand on, beyond test_public_api.cc: token
// input, attention, batching by tokens, progress and cancellation, files, one Translator in
// several threads, training progress, and a model's weights read and written as plain arrays.
// Only <tfm/...> headers, as an outside program.
#include <gtest/gtest.h>
#include <tfm/tfm.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "public_api_test_util.h"

namespace {

namespace fs = std::filesystem;

class ApiForBindings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("tfm_api_for_bindings_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    model_dir_ = tfm::internal::testing::train_api_model(dir_).last_checkpoint;
    model_ = tfm::Model::load(model_dir_);
  }
  static void TearDownTestSuite() {
    model_.reset();
    fs::remove_all(dir_);
  }

  static fs::path dir_;
  static fs::path model_dir_;
  static std::shared_ptr<const tfm::Model> model_;
};

fs::path ApiForBindings::dir_;
fs::path ApiForBindings::model_dir_;
std::shared_ptr<const tfm::Model> ApiForBindings::model_;

const std::vector<std::string> kSources{"a man runs in the park.", "the dog.",
                                        "two girls play with a red ball in the park."};

tfm::TranslationOptions short_options() {
  tfm::TranslationOptions options;
  options.beam_size = 3;
  options.n_best = 2;
  options.max_length = 7;
  return options;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void expect_same(const std::vector<tfm::TranslationResult>& a,
                 const std::vector<tfm::TranslationResult>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].hypotheses.size(), b[i].hypotheses.size()) << i;
    for (size_t k = 0; k < a[i].hypotheses.size(); ++k) {
      EXPECT_EQ(a[i].hypotheses[k].text, b[i].hypotheses[k].text) << i;
      EXPECT_EQ(a[i].hypotheses[k].tokens, b[i].hypotheses[k].tokens) << i;
      EXPECT_NEAR(a[i].hypotheses[k].score, b[i].hypotheses[k].score, 1e-5) << i;
    }
  }
}

TEST_F(ApiForBindings, TokensInGiveTheTranslationsOfTheText) {
  tfm::Translator translator(model_, {1});
  std::vector<std::vector<std::string>> tokens;
  for (const auto& source : kSources) {
    tokens.push_back(model_->tokenize(source));
    EXPECT_EQ(model_->detokenize(tokens.back()), source);
  }
  tokens.emplace_back();  // an empty source: an empty result
  auto from_tokens = translator.translate_tokens(tokens, short_options());
  ASSERT_EQ(from_tokens.size(), 4u);
  EXPECT_TRUE(from_tokens.back().hypotheses.empty());
  from_tokens.pop_back();
  expect_same(from_tokens, translator.translate(kSources, short_options()));
  // Pieces the vocabulary lacks read as <unk> (id 1).
  EXPECT_EQ(model_->token_ids({"<s>", "</s>", "no-such-piece"}), (std::vector<int32_t>{2, 3, 1}));
}

TEST_F(ApiForBindings, AttentionHasARowPerGeneratedTokenOverTheSourceTokens) {
  tfm::Translator translator(model_, {1});
  tfm::TranslationOptions options = short_options();
  options.return_attention = true;
  const auto results = translator.translate(kSources, options);
  for (size_t i = 0; i < kSources.size(); ++i) {
    const size_t source_tokens = model_->tokenize(kSources[i]).size();
    for (const auto& h : results[i].hypotheses) {
      // The end of sentence has a row too, when the search produced one.
      ASSERT_GE(h.attention.size(), h.tokens.size());
      ASSERT_LE(h.attention.size(), h.tokens.size() + 1);
      for (const auto& row : h.attention) {
        ASSERT_EQ(row.size(), source_tokens);
        double sum = 0;
        for (float w : row) sum += w;
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
  // Without it no attention; layer -1 is the last layer (0 of this 1-layer model); head 1 differs
  // from the mean of the heads.
  EXPECT_TRUE(translator.translate(kSources, short_options())[0].hypotheses[0].attention.empty());
  options.attention_layer = 0;
  EXPECT_EQ(translator.translate(kSources, options)[0].hypotheses[0].attention,
            results[0].hypotheses[0].attention);
  options.attention_head = 1;
  EXPECT_NE(translator.translate(kSources, options)[0].hypotheses[0].attention,
            results[0].hypotheses[0].attention);
  options.attention_layer = 1;
  EXPECT_THROW(translator.translate(kSources, options), tfm::Error);
  options.attention_layer = -1;
  options.attention_head = 2;
  EXPECT_THROW(translator.translate(kSources, options), tfm::Error);
}

TEST_F(ApiForBindings, BatchTokensChangesTheBatchesNotTheTranslations) {
  tfm::Translator translator(model_, {1});
  tfm::TranslationOptions options = short_options();
  std::vector<int64_t> batches;
  options.batch_tokens = 1;  // one sentence a batch
  options.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 3);
    batches.push_back(done);
  };
  const auto one_by_one = translator.translate(kSources, options);
  EXPECT_EQ(batches, (std::vector<int64_t>{1, 2, 3}));
  options.batch_tokens = 0;
  batches.clear();
  expect_same(one_by_one, translator.translate(kSources, options));
  EXPECT_EQ(batches, (std::vector<int64_t>{3}));
  options.batch_tokens = -1;
  EXPECT_THROW(translator.translate(kSources, options), tfm::Error);
}

TEST_F(ApiForBindings, AnExceptionFromProgressCancelsTheCall) {
  tfm::Translator translator(model_, {1});
  tfm::TranslationOptions options = short_options();
  options.batch_size = 1;
  int calls = 0;
  options.progress = [&](int64_t, int64_t) {
    if (++calls == 2) throw std::runtime_error("cancelled");
  };
  EXPECT_THROW(translator.translate(kSources, options), std::runtime_error);
  EXPECT_EQ(calls, 2);
  // A file translation cancelled midway leaves no output behind.
  const fs::path input = dir_ / "cancel.en", output = dir_ / "cancel.de";
  tfm::internal::testing::api_write_lines(input, kSources);
  calls = 0;
  EXPECT_THROW(translator.translate_file(input, output, options), std::runtime_error);
  EXPECT_FALSE(fs::exists(output));
}

TEST_F(ApiForBindings, TranslatesAFileLineByLine) {
  tfm::Translator translator(model_, {1});
  const std::vector<std::string> lines{kSources[0], "", kSources[1], kSources[2]};
  const fs::path input = dir_ / "input.en", output = dir_ / "output.de";
  tfm::internal::testing::api_write_lines(input, lines);
  const auto expected = translator.translate(lines, short_options());
  std::vector<int64_t> progress;
  tfm::TranslationOptions options = short_options();
  options.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 3);
    progress.push_back(done);
  };
  EXPECT_EQ(translator.translate_file(input, output, options), 4);
  EXPECT_EQ(progress.back(), 3);
  std::string best, nbest;
  for (size_t i = 0; i < lines.size(); ++i) {
    best += (expected[i].hypotheses.empty() ? "" : expected[i].hypotheses[0].text) + "\n";
    for (const auto& h : expected[i].hypotheses) {
      std::ostringstream line;
      line << i << " ||| " << h.text << " ||| " << h.score << "\n";
      nbest += line.str();
    }
  }
  EXPECT_EQ(read_file(output), best);
  translator.translate_file(input, output, short_options(), /*n_best_output=*/true);
  EXPECT_EQ(read_file(output), nbest);
  EXPECT_THROW(translator.translate_file(dir_ / "missing.en", output), tfm::Error);
}

TEST_F(ApiForBindings, OneTranslatorInFourThreadsAtOnceGivesTheResultsOfOne) {
  tfm::Translator translator(model_, {1});
  const auto expected = translator.translate(kSources, short_options());
  std::vector<std::vector<tfm::TranslationResult>> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 3; ++repeat)
        got[t] = translator.translate(kSources, short_options());
    });
  for (auto& thread : threads) thread.join();
  for (const auto& results : got) {
    ASSERT_EQ(results.size(), expected.size());
    for (size_t i = 0; i < results.size(); ++i) {
      EXPECT_EQ(results[i].hypotheses[0].text, expected[i].hypotheses[0].text);
      EXPECT_EQ(results[i].hypotheses[0].score, expected[i].hypotheses[0].score);
    }
  }
}

TEST_F(ApiForBindings, TrainingReportsProgressAndStopsWhenTheCallbackThrows) {
  tfm::TrainingOptions options;
  options.recipe = dir_ / "recipe.yaml";
  options.overrides = {"training.log_every=2"};
  options.run_dir = dir_ / "progress-run";
  options.max_steps = 6;
  std::vector<tfm::TrainingProgress> reports;
  options.progress = [&](const tfm::TrainingProgress& p) { reports.push_back(p); };
  const tfm::TrainingResult result = tfm::train(options);
  EXPECT_EQ(result.steps, 6);
  std::vector<int64_t> train_steps;
  for (const auto& p : reports) {
    if (p.kind != "train") continue;
    train_steps.push_back(p.step);
    EXPECT_EQ(p.epoch, 1);
    EXPECT_GT(p.loss, 0);
    EXPECT_NEAR(p.perplexity, std::exp(p.loss), p.perplexity);  // label smoothing: loss > nll
    EXPECT_GT(p.learning_rate, 0);
    EXPECT_GT(p.tokens_per_second, 0);
    EXPECT_EQ(p.bleu, -1);
  }
  EXPECT_EQ(train_steps, (std::vector<int64_t>{2, 4, 6}));

  options.run_dir = dir_ / "stopped-run";
  options.progress = [](const tfm::TrainingProgress& p) {
    if (p.step >= 4) throw std::runtime_error("enough");
  };
  EXPECT_THROW(tfm::train(options), std::runtime_error);
}

TEST_F(ApiForBindings, WeightsReadAndWrittenAsArraysRoundTripBitForBit) {
  const tfm::ModelWeights read = tfm::read_model_weights(model_dir_);
  EXPECT_NE(read.config_json.find("\"d_model\": 16"), std::string::npos) << read.config_json;
  ASSERT_FALSE(read.weights.empty());
  EXPECT_EQ(read.weights.front().name, "embedding.weight");
  EXPECT_EQ(read.weights.front().shape, (std::vector<int64_t>{60, 16}));
  const std::string vocabulary = read_file(model_dir_ / "vocab.model");
  const fs::path copy = dir_ / "copy";
  tfm::write_model_weights(copy, read, vocabulary);
  for (const char* file : {"config.json", "model.safetensors", "vocab.model"})
    EXPECT_EQ(read_file(copy / file), read_file(model_dir_ / file)) << file;
  const tfm::ModelWeights again = tfm::read_model_weights(copy);
  ASSERT_EQ(again.weights.size(), read.weights.size());
  for (size_t i = 0; i < read.weights.size(); ++i) {
    const auto& a = read.weights[i];
    const auto& b = again.weights[i];
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.shape, b.shape);
    size_t count = 1;
    for (int64_t d : a.shape) count *= static_cast<size_t>(d);
    EXPECT_EQ(std::memcmp(a.data, b.data, count * sizeof(float)), 0) << a.name;
  }
  tfm::Translator original(model_, {1}), copied(tfm::Model::load(copy), {1});
  expect_same(copied.translate(kSources, short_options()),
              original.translate(kSources, short_options()));
}

TEST_F(ApiForBindings, WritingWeightsChecksEverythingBeforeWritingAnything) {
  const tfm::ModelWeights good = tfm::read_model_weights(model_dir_);
  const std::string vocabulary = read_file(model_dir_ / "vocab.model");
  const fs::path out = dir_ / "refused";
  auto expect_refused = [&](const tfm::ModelWeights& model, const std::string& vocab,
                            const std::string& part) {
    try {
      tfm::write_model_weights(out, model, vocab);
      ADD_FAILURE() << "no error; expected one containing: " << part;
    } catch (const tfm::Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(out));
  };
  tfm::ModelWeights model = good;
  model.config_json = "{\"d_model\": 16,";
  expect_refused(model, vocabulary, "not valid JSON");
  model.config_json = "{\"d_model\": 16, \"colour\": 1}";
  expect_refused(model, vocabulary, "colour");
  model = good;
  model.weights.pop_back();
  expect_refused(model, vocabulary, "is missing");
  model = good;
  model.weights[0].shape = {16, 60};
  expect_refused(model, vocabulary, "has shape [16, 60], expected [60, 16]");
  model = good;
  std::vector<float> with_nan(60 * 16, 0.5f);
  with_nan[7] = std::nanf("");
  model.weights[0].data = with_nan.data();
  expect_refused(model, vocabulary, "non-finite");
  expect_refused(good, "not a SentencePiece model", "is not a SentencePiece model");
}

}  // namespace
