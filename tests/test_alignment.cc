// decode/alignment.h: words from SentencePiece pieces, attention merged into words (to a word
// summed, from a word averaged), hard and threshold word alignments, the Pharaoh format.
#include <gtest/gtest.h>

#include "temp_dir.h"
#include "tfm/decode/alignment.h"

namespace tfm::internal {
namespace {

using decode::Alignment;

TEST(Alignment, WordsStartAtTheMarkAndSpecialTokensStandAlone) {
  const std::vector<std::string> pieces{"<s>", "▁Zw", "ei", "▁jung", "e", "</s>", "x", "▁."};
  const std::vector<int64_t> words = decode::word_of_pieces(pieces);
  EXPECT_EQ(words, (std::vector<int64_t>{0, 1, 1, 2, 2, 3, 4, 5}));
  EXPECT_EQ(decode::join_words(pieces, words),
            (std::vector<std::string>{"<s>", "Zwei", "junge", "</s>", "x", "."}));
  // A first piece without the mark is a word too.
  EXPECT_EQ(decode::word_of_pieces({"ab", "c", "▁d"}), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_TRUE(decode::word_of_pieces({}).empty());
}

TEST(Alignment, MergingSumsTheKeysAndAveragesTheQueries) {
  // 3 query pieces (words 0, 0, 1) x 3 key pieces (words 0, 1, 1); rows sum to 1.
  const std::vector<float> w{0.5f, 0.3f, 0.2f,  //
                             0.1f, 0.6f, 0.3f,  //
                             0.7f, 0.2f, 0.1f};
  const std::vector<float> merged = decode::merge_to_words(w, {0, 0, 1}, {0, 1, 1});
  ASSERT_EQ(merged.size(), 4u);
  EXPECT_FLOAT_EQ(merged[0], (0.5f + 0.1f) / 2);
  EXPECT_FLOAT_EQ(merged[1], (0.5f + 0.9f) / 2);
  EXPECT_FLOAT_EQ(merged[2], 0.7f);
  EXPECT_FLOAT_EQ(merged[3], 0.3f);
  EXPECT_FLOAT_EQ(merged[0] + merged[1], 1.0f);
  testing::expect_error(
      [&] {
        decode::merge_to_words(w, {0, 1}, {0, 1, 1});
      },
      {"9 weights for 2 x 3 pieces"});
}

TEST(Alignment, HardAndThresholdAlignments) {
  // 3 target words x 4 source words.
  const std::vector<float> w{0.1f, 0.7f, 0.1f, 0.1f,  //
                             0.4f, 0.1f, 0.1f, 0.4f,  //
                             0.0f, 0.3f, 0.3f, 0.4f};
  EXPECT_EQ(decode::align_words(w, 3, 4), (Alignment{{1, 0}, {0, 1}, {3, 2}}));  // tie: lower
  EXPECT_EQ(decode::align_words(w, 3, 4, 0.3),
            (Alignment{{1, 0}, {0, 1}, {3, 1}, {1, 2}, {2, 2}, {3, 2}}));
  EXPECT_EQ(decode::pharaoh({{1, 0}, {0, 1}, {3, 2}}), "1-0 0-1 3-2");
  EXPECT_EQ(decode::pharaoh({}), "");
}

TEST(Alignment, ATranslationsPiecesBecomeWords) {
  // Source "▁a ▁bi g" (2 words), target "▁x y ▁z" (2 words) then eos's row, which is not read.
  const std::vector<std::vector<float>> attention{
      {0.1f, 0.2f, 0.7f}, {0.3f, 0.3f, 0.4f}, {0.8f, 0.1f, 0.1f}, {0.2f, 0.2f, 0.6f}};
  const Alignment a = decode::align_translation(attention, {"▁a", "▁bi", "g"}, {"▁x", "y", "▁z"});
  EXPECT_EQ(a, (Alignment{{1, 0}, {0, 1}}));
  testing::expect_error(
      [&] {
        decode::align_translation({{0.5f, 0.5f}}, {"▁a", "▁b", "▁c"}, {"▁x"});
      },
      {"token 0 has weights over 2 source positions, not 3"});
}

// A character the vocabulary lacks inside a source word ("A mán runs": "▁A ▁m <unk> n ▁runs") was
// a word of its own and split its word in three, so that alignments named source words past the
// input's ("4-0" for 3 words). <unk> now continues its word; a target's <unk> stays a word, as its
// text (" ⁇ ") is.
TEST(Alignment, AnUnknownCharacterStaysInsideItsSourceWord) {
  const std::vector<std::string> source{"▁A", "▁m", "<unk>", "n", "▁runs"};
  EXPECT_EQ(decode::word_of_pieces(source, true), (std::vector<int64_t>{0, 1, 1, 1, 2}));
  EXPECT_EQ(decode::word_of_pieces(source), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // At the start of a word ("▁ <unk>") and of the sentence.
  EXPECT_EQ(decode::word_of_pieces({"<unk>", "u", "▁", "<unk>", "<unk>", "▁x"}, true),
            (std::vector<int64_t>{0, 0, 1, 1, 1, 2}));
  // The target attends most to the last piece, "▁runs": source word 2 of 3 (it was 4 of 5).
  const std::vector<std::vector<float>> attention{{0.1f, 0.1f, 0.1f, 0.1f, 0.6f},
                                                  {0.1f, 0.1f, 0.1f, 0.6f, 0.1f}};
  EXPECT_EQ(decode::align_translation(attention, source, {"▁l", "<unk>"}),
            (Alignment{{2, 0}, {1, 1}}));
}

}  // namespace
}  // namespace tfm::internal
