// WordEncoder (data/word_encoder.h): encoding word by word through a memo gives exactly the ids of
// whole-sentence SentencePiece encoding, for every vocabulary type tfm trains, on real text in
// three languages and on white-space and normalisation edge cases.
#include <gtest/gtest.h>

#include <cstdlib>

#include "build_paths.h"
#include "data_test_util.h"
#include "tfm/data/word_encoder.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::testing {
namespace {

std::filesystem::path shared_data() {
  if (const char* env = std::getenv("TFM_DATA_DIR"); env && *env) return env;
  return std::filesystem::path(tfm_source_dir()) / "../shared/data";
}

std::vector<std::string> read_all(const std::filesystem::path& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) lines.push_back(line);
  return lines;
}

// Lines whose white space and characters the normaliser rewrites.
const std::vector<std::string> kEdgeCases = {
    "",
    " ",
    "  two  spaces  between ",
    "\ttab\tinside and\t at the edges\t",
    "no\u00a0break space",
    "ideographic\u3000space and thin\u2009space",
    "zero\u200bwidth \u200b alone",
    "combining \u0301accent after a space",
    "full-width \uff21\uff22\uff23 and the \ufb01 ligature",
    "unknown \u4e2d\u6587 and \u0398\u03b5\u03cc\u03c2 and emoji \U0001F600\U0001F600",
    "trailing space ",
    "\u00a0leading no-break space"};

void expect_same_ids(const data::Vocabulary& vocab, const std::vector<std::string>& lines,
                     const std::string& what) {
  data::WordEncoder encoder(vocab, 4096);  // small: the memo is forgotten and refilled on the way
  int64_t differing = 0;
  std::string first;
  for (const std::string& line : lines) {
    std::vector<int32_t> ids;
    encoder.encode(line, ids);
    if (ids != vocab.encode(line)) {
      if (differing++ == 0) first = line;
    }
  }
  EXPECT_EQ(differing, 0) << what << ": first differing line: '" << first << "'";
  EXPECT_GT(encoder.words(), encoder.misses()) << what << ": the memo never hit";
}

class WordEncoderTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(WordEncoderTypes, EqualsWholeSentenceEncodingOnRealText) {
  const std::filesystem::path data = shared_data();
  if (!std::filesystem::exists(data / "multi30k/train.en.gz") ||
      !std::filesystem::exists(data / "wmt14-en-fr-test/newstest2014.fr.gz")) {
    GTEST_SKIP() << "Multi30k and the newstest sets are not at $TFM_DATA_DIR or ../shared/data "
                    "(GeneratedTextAndEdgeCases still runs)";
  }
  TempDir dir;
  data::VocabTrainOptions options;
  options.inputs = {data / "multi30k/train.en.gz", data / "multi30k/train.de.gz"};
  options.output_prefix = dir / "vocab";
  options.model_type = GetParam();
  options.vocab_size = 2000;
  options.input_sentence_size = 20000;
  const data::Vocabulary vocab(data::train_vocabulary(options).model_path);

  std::vector<std::string> lines = kEdgeCases;
  for (const char* file :
       {"multi30k/train.en.gz", "multi30k/train.de.gz", "multi30k/val.fr.gz",
        "wmt14-en-de-test/newstest2014.de.gz", "wmt14-en-fr-test/newstest2014.fr.gz"}) {
    ASSERT_TRUE(std::filesystem::exists(data / file)) << data / file;
    for (std::string& line : read_all(data / file)) lines.push_back(std::move(line));
  }
  expect_same_ids(vocab, lines, GetParam());
}

// Without the shared data: every vocabulary type on generated English and German text.
TEST_P(WordEncoderTypes, EqualsWholeSentenceEncodingOnGeneratedTextAndEdgeCases) {
  TempDir dir;
  const data::Vocabulary vocab(train_tiny_vocab(dir, GetParam() == "word" ? 60 : 150, GetParam()));
  std::vector<std::string> lines = kEdgeCases;
  for (std::string& line : generated_sentences(2000, false, 3)) lines.push_back(std::move(line));
  for (std::string& line : generated_sentences(2000, true, 4)) lines.push_back(std::move(line));
  expect_same_ids(vocab, lines, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, WordEncoderTypes,
                         ::testing::Values("bpe", "unigram", "word"));

TEST(WordEncoder, MatchesReportsEquality) {
  TempDir dir;
  const data::Vocabulary vocab(train_tiny_vocab(dir));
  data::WordEncoder checker(vocab);
  for (const std::string& line : kEdgeCases) EXPECT_TRUE(checker.matches(line)) << line;
  data::WordEncoder encoder(vocab);
  std::vector<int32_t> ids;
  encoder.encode("a man  and a dog", ids);
  EXPECT_EQ(ids, vocab.encode("a man and a dog"));
  EXPECT_EQ(encoder.words(), 5);
  EXPECT_EQ(encoder.misses(), 4);  // "a" twice
}

}  // namespace
}  // namespace tfm::internal::testing
