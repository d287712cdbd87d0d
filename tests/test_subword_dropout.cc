// BPE-dropout (data/subword_dropout.h): new segmentations of the same text, repeatable from a key,
// sequences with <unk> or over the length limit kept; and the batcher's epochs segmented anew
// within the token budget, the same after a restore.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/core/error.h"
#include "tfm/data/batcher.h"
#include "tfm/data/corpus.h"
#include "tfm/data/subword_dropout.h"

namespace tfm::internal::testing {
namespace {

using data::Batcher;
using data::Corpus;
using data::SubwordDropout;
using data::Vocabulary;

using Sequences = std::vector<std::vector<int32_t>>;

struct Fixture {
  TempDir dir;
  Vocabulary vocab{train_tiny_vocab(dir, 150)};
  std::vector<std::string> en = generated_sentences(300, false, 11);
  std::vector<std::string> de = generated_sentences(300, true, 12);
  Sequences encoded(const std::vector<std::string>& lines) const {
    Sequences out;
    for (const std::string& line : lines) out.push_back(vocab.encode(line));
    return out;
  }
};

int64_t tokens(const Sequences& sequences) {
  int64_t n = 0;
  for (const auto& ids : sequences) n += static_cast<int64_t>(ids.size());
  return n;
}

TEST(SubwordDropout, OnlyABpeVocabularyIsOne) {
  TempDir dir;
  EXPECT_TRUE(Vocabulary(train_tiny_vocab(dir, 150, "bpe")).is_bpe());
  EXPECT_FALSE(Vocabulary(train_tiny_vocab(dir, 150, "unigram")).is_bpe());
  EXPECT_FALSE(Vocabulary(train_tiny_vocab(dir, 60, "word")).is_bpe());
  const Vocabulary unigram(train_tiny_vocab(dir, 150, "unigram"));
  expect_error([&] { SubwordDropout(unigram, 0.1, 0); },
               {"is not a BPE model: BPE-dropout (data.bpe_dropout) needs one"});
  const Vocabulary bpe(train_tiny_vocab(dir, 150, "bpe"));
  expect_error([&] { SubwordDropout(bpe, 0, 0); }, {"BPE-dropout must be in (0, 1), got 0"});
  expect_error([&] { SubwordDropout(bpe, 1, 0); }, {"BPE-dropout must be in (0, 1), got 1"});
}

TEST(SubwordDropout, SegmentsAnewIntoMorePiecesOfTheSameText) {
  const Fixture f;
  // Without dropout the sampled encoding is the plain one.
  for (const std::string& line : f.en)
    EXPECT_EQ(f.vocab.sample_encode(line, 0), f.vocab.encode(line));
  Sequences sources = f.encoded(f.en), targets = f.encoded(f.de);
  const Sequences plain_sources = sources, plain_targets = targets;
  const SubwordDropout dropout(f.vocab, 0.3, 0);
  dropout.resegment(sources, targets, 7);
  int changed = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    changed += sources[i] != plain_sources[i];
    changed += targets[i] != plain_targets[i];
    EXPECT_EQ(f.vocab.decode(sources[i]), f.vocab.decode(plain_sources[i])) << i;
    EXPECT_EQ(f.vocab.decode(targets[i]), f.vocab.decode(plain_targets[i])) << i;
    for (int32_t id : sources[i]) EXPECT_NE(id, data::kUnkId) << i;
  }
  // Each merge skipped with probability 0.3: most of the 600 sentences change, and the pieces are
  // more (a skipped merge leaves two pieces).
  EXPECT_GT(changed, 400);
  EXPECT_GT(tokens(sources), tokens(plain_sources) * 11 / 10);
  EXPECT_GT(tokens(targets), tokens(plain_targets) * 11 / 10);
}

TEST(SubwordDropout, TheTargetsMayKeepTheirPlainSegmentation) {
  const Fixture f;
  Sequences sources = f.encoded(f.en), targets = f.encoded(f.de);
  const Sequences plain_sources = sources, plain_targets = targets;
  const SubwordDropout dropout(f.vocab, 0.3, 0, /*targets=*/false);
  dropout.resegment(sources, targets, 7);
  EXPECT_EQ(targets, plain_targets);
  EXPECT_GT(tokens(sources), tokens(plain_sources) * 11 / 10);
}

TEST(SubwordDropout, TheSameKeyGivesTheSameSegmentation) {
  const Fixture f;
  const SubwordDropout dropout(f.vocab, 0.1, 0);
  auto segmented = [&](uint64_t key) {
    Sequences sources = f.encoded(f.en), targets = f.encoded(f.de);
    dropout.resegment(sources, targets, key);
    sources.insert(sources.end(), targets.begin(), targets.end());
    return sources;
  };
  const Sequences first = segmented(1);
  EXPECT_EQ(segmented(1), first);
  EXPECT_NE(segmented(2), first);
  EXPECT_NE(first, f.encoded(f.en));
}

TEST(SubwordDropout, KeepsSequencesWithUnknownPiecesOrOverTheLengthLimit) {
  const Fixture f;
  Sequences sources = f.encoded(f.en), targets = f.encoded(f.de);
  // A sentence with <unk> would not decode to its text.
  sources[0].insert(sources[0].begin() + 1, data::kUnkId);
  const Sequences plain_sources = sources, plain_targets = targets;
  int64_t longest = 0;
  for (const auto& ids : plain_sources) longest = std::max<int64_t>(longest, ids.size());
  for (const auto& ids : plain_targets) longest = std::max<int64_t>(longest, ids.size() + 1);
  const SubwordDropout dropout(f.vocab, 0.5, longest);
  dropout.resegment(sources, targets, 3);
  EXPECT_EQ(sources[0], plain_sources[0]);
  int kept_at_the_limit = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_LE(static_cast<int64_t>(sources[i].size()), longest) << i;
    EXPECT_LE(static_cast<int64_t>(targets[i].size()) + 1, longest) << i;
    kept_at_the_limit +=
        static_cast<int64_t>(plain_sources[i].size()) == longest && sources[i] == plain_sources[i];
  }
  EXPECT_GT(kept_at_the_limit, 0);
}

TEST(SubwordDropout, EachEpochIsSegmentedAnewWithinTheBudgetAndResumesAlike) {
  const Fixture f;
  const Corpus corpus = Corpus::load(f.dir / "en.txt", f.dir / "de.txt", f.vocab);
  const SubwordDropout dropout(f.vocab, 0.2, 0);
  data::BatcherOptions options;
  options.max_tokens = 400;
  options.window_batches = 4;
  Batcher batcher(corpus, options, 5, &dropout);
  std::vector<data::TokenBatch> epochs[2];
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<std::string> texts;
    int64_t tokens_seen = 0;
    const int64_t batches = batcher.batches_in_epoch();
    for (int64_t b = 0; b < batches; ++b) {
      data::TokenBatch batch = batcher.next();
      EXPECT_LE(batch.rows * (batch.source_width + batch.target_width), options.max_tokens);
      for (int64_t r = 0; r < batch.rows; ++r) {
        std::vector<int32_t> source, target;
        for (int64_t c = 0; c < batch.source_width; ++c)
          if (const int32_t id = batch.src[r * batch.source_width + c]; id != data::kPadId)
            source.push_back(id);
        for (int64_t c = 0; c < batch.target_width; ++c)
          if (const int32_t id = batch.tgt_out[r * batch.target_width + c]; id != data::kPadId)
            target.push_back(id);
        tokens_seen += static_cast<int64_t>(source.size());
        texts.insert(f.vocab.decode(source) + " | " + f.vocab.decode(target));
      }
      epochs[epoch].push_back(std::move(batch));
    }
    // Every pair once, its sentences together and unchanged, in more pieces than the plain
    // segmentation's (decode drops the target's eos).
    std::multiset<std::string> pairs;
    for (size_t i = 0; i < f.en.size(); ++i) pairs.insert(f.en[i] + " | " + f.de[i]);
    EXPECT_EQ(texts, pairs);
    EXPECT_GT(tokens_seen, corpus.stats().source_tokens);
  }
  EXPECT_NE(epochs[0].front().src, epochs[1].front().src);
  // A batcher restored into epoch 1 makes the same batches as the one that went through epoch 0.
  Batcher resumed(corpus, options, 5, &dropout);
  resumed.restore({1, 0});
  for (const data::TokenBatch& expected : epochs[1]) {
    const data::TokenBatch batch = resumed.next();
    EXPECT_EQ(batch.src, expected.src);
    EXPECT_EQ(batch.tgt_in, expected.tgt_in);
    EXPECT_EQ(batch.tgt_out, expected.tgt_out);
  }
}

}  // namespace
}  // namespace tfm::internal::testing
