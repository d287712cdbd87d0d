// The parts of the corpus path that let it scale: the streamed, memory-mapped cache file (16- and
// 32-bit ids), the word memo and its fallback to whole-sentence encoding, and filtering a mapped
// corpus without copying it.
#include <sentencepiece_trainer.h>

#include <chrono>
#include <thread>

#include "data_test_util.h"
#include "tfm/data/batcher.h"
#include "tfm/data/corpus.h"
#include "tfm/data/corpus_cache.h"
#include "tfm/io/progress_meter.h"

namespace tfm::internal::testing {
namespace {

using data::Corpus;
using data::CorpusOptions;

std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> some_pairs(int32_t top_id) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  for (int32_t i = 0; i < 5000; ++i) {  // over the writer's buffers
    std::vector<int32_t> source, target;
    for (int64_t j = 0; j <= i % 37; ++j)
      source.push_back(static_cast<int32_t>((i * int64_t{7919} + j * 104729) % top_id));
    for (int64_t j = 0; j <= i % 23; ++j)
      target.push_back(static_cast<int32_t>((i * int64_t{15485863} + j) % top_id));
    if (i % 10 == 0) source[0] = data::kUnkId;
    pairs.emplace_back(std::move(source), std::move(target));
  }
  return pairs;
}

TEST(CorpusCache, WritesAndMapsSixteenAndThirtyTwoBitIds) {
  TempDir dir;
  for (const auto& [id_bytes, top_id] : {std::pair{2, 65536}, std::pair{4, 1 << 24}}) {
    const auto pairs = some_pairs(top_id);
    const auto file = dir / fmt::format("c{}.tfmcorpus", id_bytes);
    {
      data::CorpusCacheWriter writer(file, 42, id_bytes);
      for (const auto& [s, t] : pairs) writer.add(s, t);
      writer.commit(5005, 3, 2);
    }
    const auto mapped = data::map_corpus_cache(file, 42);
    ASSERT_TRUE(mapped.has_value()) << id_bytes;
    EXPECT_EQ(mapped->trailer.pairs, 5000);
    EXPECT_EQ(mapped->trailer.lines, 5005);
    EXPECT_EQ(mapped->trailer.empty_skipped, 3);
    EXPECT_EQ(mapped->trailer.invalid_skipped, 2);
    EXPECT_EQ(mapped->trailer.id_bytes, id_bytes);
    int64_t tokens = 0, unknown = 0;
    for (const auto& [s, t] : pairs) {
      tokens += static_cast<int64_t>(s.size() + t.size());
      unknown += std::count(s.begin(), s.end(), data::kUnkId) +
                 std::count(t.begin(), t.end(), data::kUnkId);
    }
    EXPECT_EQ(mapped->trailer.tokens, tokens);
    EXPECT_EQ(mapped->trailer.unknown_tokens, unknown);
    EXPECT_GT(unknown, 0);
    EXPECT_FALSE(data::map_corpus_cache(file, 43).has_value()) << "another key";
    // The ids read back through the mapping.
    const auto* o = mapped->offsets;
    for (size_t i = 0; i < pairs.size(); i += 499) {
      const auto& [s, t] = pairs[i];
      ASSERT_EQ(o[2 * i + 1] - o[2 * i], s.size());
      ASSERT_EQ(o[2 * i + 2] - o[2 * i + 1], t.size());
      for (size_t j = 0; j < s.size(); ++j) {
        const int64_t id = id_bytes == 2
                               ? reinterpret_cast<const uint16_t*>(mapped->ids)[o[2 * i] + j]
                               : reinterpret_cast<const int32_t*>(mapped->ids)[o[2 * i] + j];
        ASSERT_EQ(id, s[j]) << i << " " << j;
      }
    }
    // No temporary file is left beside it.
    int files = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
      ++files;
    EXPECT_EQ(files, id_bytes == 2 ? 1 : 2);
  }
}

TEST(CorpusCache, AWriterDestroyedBeforeCommitLeavesNothing) {
  TempDir dir;
  {
    data::CorpusCacheWriter writer(dir / "c.tfmcorpus", 1, 2);
    const auto pairs = some_pairs(100);
    for (const auto& [s, t] : pairs) writer.add(s, t);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  data::CorpusCacheWriter writer(dir / "c.tfmcorpus", 1, 2);
  const std::vector<int32_t> too_large = {70000};
  EXPECT_THROW(writer.add(too_large, too_large), Error);
}

// A vocabulary whose pieces cross spaces (SentencePiece's split_by_whitespace off): encoding a
// word at a time would differ, so the reader notices and encodes whole sentences.
TEST(CorpusScale, WordMemoFallsBackForPiecesAcrossSpaces) {
  TempDir dir;
  write_text(dir / "en.txt", joined_lines(generated_sentences(300, false, 11)));
  write_text(dir / "de.txt", joined_lines(generated_sentences(300, true, 12)));
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + (dir / "en.txt").string() + "," + (dir / "de.txt").string() +
      " --model_prefix=" + (dir / "spaces").string() +
      " --vocab_size=1500 --hard_vocab_limit=false --model_type=bpe --split_by_whitespace=false "
      "--pad_id=0 --unk_id=1"
      " --bos_id=2 --eos_id=3 --minloglevel=2");
  ASSERT_TRUE(status.ok()) << status.ToString();
  const data::Vocabulary vocab(dir / "spaces.model");
  const auto en = generated_sentences(300, false, 11), de = generated_sentences(300, true, 12);
  // The premise: some piece spans a space.
  bool crosses = false;
  for (int32_t id = 4; id < vocab.size() && !crosses; ++id) {
    const std::string piece = vocab.piece(id);
    crosses = piece.find("\xe2\x96\x81", 1) != std::string::npos;
  }
  ASSERT_TRUE(crosses);

  std::vector<std::string> messages;
  CorpusOptions options;
  options.cache_dir = dir / "cache";
  options.progress = [&messages](const std::string& line) { messages.push_back(line); };
  const Corpus corpus = Corpus::load(dir / "en.txt", dir / "de.txt", vocab, options);
  EXPECT_FALSE(corpus.stats().word_memo);
  ASSERT_EQ(corpus.size(), 300);
  for (int64_t i = 0; i < corpus.size(); ++i) {
    ASSERT_EQ(corpus.source(i), vocab.encode(en[static_cast<size_t>(i)])) << i;
    ASSERT_EQ(corpus.target(i), vocab.encode(de[static_cast<size_t>(i)])) << i;
  }
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("encoding whole sentences"), std::string::npos) << messages[0];
}

TEST(CorpusScale, MappedCorpusFiltersAndBatchesLikeOneInMemory) {
  TempDir dir;
  const data::Vocabulary vocab(train_tiny_vocab(dir));
  CorpusOptions options;
  options.max_length = 40;
  const Corpus in_memory = Corpus::load(dir / "en.txt", dir / "de.txt", vocab, options);
  options.cache_dir = dir / "cache";
  const Corpus mapped = Corpus::load(dir / "en.txt", dir / "de.txt", vocab, options);
  EXPECT_TRUE(mapped.stats().word_memo);
  EXPECT_EQ(mapped.stats().id_bytes, 2);
  EXPECT_EQ(in_memory.stats().id_bytes, 4);
  ASSERT_GT(mapped.stats().too_long_skipped, 0);
  ASSERT_EQ(mapped.size(), in_memory.size());
  EXPECT_EQ(mapped.stats().unknown_tokens, in_memory.stats().unknown_tokens);
  EXPECT_EQ(mapped.stats().source_tokens, in_memory.stats().source_tokens);
  const data::BatcherOptions batching{.max_tokens = 200};
  data::Batcher a(in_memory, batching, 7), b(mapped, batching, 7);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  for (int step = 0; step < 20; ++step) {
    const data::TokenBatch x = a.next(), y = b.next();
    ASSERT_EQ(x.src, y.src) << step;
    ASSERT_EQ(x.tgt_in, y.tgt_in) << step;
    ASSERT_EQ(x.tgt_out, y.tgt_out) << step;
  }
  // A copy shares the mapping and stays valid after the original is gone.
  std::optional<Corpus> original = Corpus::load(dir / "en.txt", dir / "de.txt", vocab, options);
  const Corpus copy = *original;
  original.reset();
  EXPECT_EQ(copy.source(3), mapped.source(3));
}

// Crawled corpora hold a few lines of invalid UTF-8 or without newlines for megabytes: an error
// by default, naming file and line; with skip_invalid_lines the pair is skipped, counted and named.
TEST(CorpusScale, InvalidAndOverLongLinesAreErrorsOrSkipped) {
  TempDir dir;
  const data::Vocabulary vocab(train_tiny_vocab(dir));
  auto en = generated_sentences(50, false, 11), de = generated_sentences(50, true, 12);
  en[9] = "broken \xff byte";
  de[19] = std::string(3000, 'x');  // over the limit below, in one line
  de[29] = std::string(10, 'y') + "\xc3";
  write_text(dir / "a.en", joined_lines(en));
  write_text(dir / "a.de", joined_lines(de));
  CorpusOptions options;
  options.max_line_bytes = 1000;
  options.cache_dir = dir / "cache";
  try {
    Corpus::load(dir / "a.en", dir / "a.de", vocab, options);
    FAIL() << "an invalid line was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.en:10: invalid UTF-8 at byte 8"), std::string::npos)
        << e.what();
  }
  std::vector<std::string> messages;
  options.skip_invalid_lines = true;
  options.progress = [&messages](const std::string& line) { messages.push_back(line); };
  for (const bool cached : {false, true}) {
    messages.clear();
    const Corpus corpus = Corpus::load(dir / "a.en", dir / "a.de", vocab, options);
    EXPECT_EQ(corpus.stats().from_cache, cached);
    EXPECT_EQ(corpus.stats().invalid_skipped, 3);
    EXPECT_EQ(corpus.stats().lines, 50);
    ASSERT_EQ(corpus.size(), 47);
    EXPECT_EQ(corpus.source(9), vocab.encode(en[10]));  // the pair after the first skipped one
    EXPECT_EQ(corpus.target(46), vocab.encode(de[49]));
    EXPECT_NE(corpus.stats().summary().find("3 as invalid"), std::string::npos);
    if (!cached) {
      ASSERT_EQ(messages.size(), 3u);
      EXPECT_NE(messages[1].find("a.de:20: line longer than the limit"), std::string::npos)
          << messages[1];
      EXPECT_NE(messages[2].find("a.de:30: invalid UTF-8 at byte 11"), std::string::npos)
          << messages[2];
    }
  }
}

TEST(ProgressMeter, ReportsCountRateShareAndTimeLeft) {
  std::vector<std::string> lines;
  ProgressMeter meter([&lines](const std::string& line) { lines.push_back(line); },
                      "encoding train.en", "pairs", 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  meter.update(5000, 0.25);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("encoding train.en: 5000 pairs, "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("k pairs/s, 25% read, about "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" left"), std::string::npos) << lines[0];
  ProgressMeter quiet([&lines](const std::string& line) { lines.push_back(line); }, "x", "y", 60);
  quiet.update(1, 0.5);  // not a minute yet
  EXPECT_EQ(lines.size(), 1u);
  EXPECT_EQ(duration_text(42), "42 s");
  EXPECT_EQ(duration_text(185), "3 min 05 s");
  EXPECT_EQ(duration_text(7800), "2 h 10 min");
}

}  // namespace
}  // namespace tfm::internal::testing
