// Parallel corpus reading: line checks with file:line errors, gzip, CRLF, the max_length filter
// and the encoded-corpus cache (reused, and missed when an input or the vocabulary changes).
#include <thread>

#include "data_test_util.h"
#include "tfm/data/corpus.h"
#include "tfm/io/text_lines.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::testing {
namespace {

using data::Corpus;
using data::CorpusOptions;
using data::Vocabulary;

// The vocabulary and a 300-pair corpus (dir/en.txt, dir/de.txt) it was trained on.
struct Fixture {
  TempDir dir;
  std::filesystem::path model = train_tiny_vocab(dir);
  Vocabulary vocab{model};
  std::vector<std::string> en = generated_sentences(300, false, 11);
  std::vector<std::string> de = generated_sentences(300, true, 12);
};

std::vector<int32_t> ids(std::span<const int32_t> s) {
  return {s.begin(), s.end()};
}

void expect_same(const Corpus& a, const Corpus& b) {
  ASSERT_EQ(a.size(), b.size());
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(ids(a.source(i)), ids(b.source(i))) << i;
    ASSERT_EQ(ids(a.target(i)), ids(b.target(i))) << i;
  }
}

TEST(Corpus, EncodesEveryLinePair) {
  Fixture f;
  const Corpus corpus = Corpus::load(f.dir / "en.txt", f.dir / "de.txt", f.vocab);
  ASSERT_EQ(corpus.size(), 300);
  int64_t source_tokens = 0, target_tokens = 0;
  for (int64_t i = 0; i < corpus.size(); ++i) {
    EXPECT_EQ(ids(corpus.source(i)), f.vocab.encode(f.en[i])) << i;
    EXPECT_EQ(ids(corpus.target(i)), f.vocab.encode(f.de[i])) << i;
    source_tokens += corpus.source_length(i);
    target_tokens += corpus.target_length(i);
  }
  const auto& stats = corpus.stats();
  EXPECT_EQ(stats.lines, 300);
  EXPECT_EQ(stats.pairs, 300);
  EXPECT_EQ(stats.empty_skipped + stats.too_long_skipped + stats.unknown_tokens, 0);
  EXPECT_EQ(stats.source_tokens, source_tokens);
  EXPECT_EQ(stats.target_tokens, target_tokens);
  EXPECT_FALSE(stats.from_cache);
  EXPECT_NE(stats.summary().find("300 pairs of 300 lines"), std::string::npos) << stats.summary();
}

TEST(Corpus, ReadsGzipCrlfAndAMissingLastNewline) {
  Fixture f;
  const Corpus plain = Corpus::load(f.dir / "en.txt", f.dir / "de.txt", f.vocab);
  write_gzip(f.dir / "en.txt.gz", read_text(f.dir / "en.txt"));
  write_gzip(f.dir / "de.txt.gz", read_text(f.dir / "de.txt"));
  expect_same(Corpus::load(f.dir / "en.txt.gz", f.dir / "de.txt.gz", f.vocab), plain);
  expect_same(Corpus::load(f.dir / "en.txt.gz", f.dir / "de.txt", f.vocab), plain);

  std::string crlf;
  for (const auto& line : f.de) crlf += line + "\r\n";
  write_text(f.dir / "de_crlf.txt", crlf);
  std::string text = read_text(f.dir / "en.txt");
  text.pop_back();  // no newline after the last line
  write_text(f.dir / "en_open.txt", text);
  expect_same(Corpus::load(f.dir / "en_open.txt", f.dir / "de_crlf.txt", f.vocab), plain);
}

TEST(Corpus, LineErrorsNameFileAndLine) {
  Fixture f;
  const auto en = f.dir / "en.txt", de = f.dir / "de.txt";
  expect_error([&] { Corpus::load(f.dir / "none.en", de, f.vocab); },
               {"none.en", "does not exist"});

  auto lines = f.de;
  lines.pop_back();
  write_text(f.dir / "short.de", joined_lines(lines));
  expect_error([&] { Corpus::load(en, f.dir / "short.de", f.vocab); },
               {"en.txt' has 300 lines", "short.de' has 299"});
  expect_error([&] { Corpus::load(f.dir / "short.de", en, f.vocab); },
               {"short.de' has 299 lines", "en.txt' has 300"});

  lines = f.de;
  lines[16] = "Ein Mann \xc3\x28 im Park";  // a lead byte without its continuation, line 17
  write_text(f.dir / "bad_utf8.de", joined_lines(lines));
  expect_error([&] { Corpus::load(en, f.dir / "bad_utf8.de", f.vocab); },
               {"bad_utf8.de:17:", "invalid UTF-8 at byte 10"});

  lines = f.de;
  lines[41] = "  \t";
  write_text(f.dir / "blank.de", joined_lines(lines));
  expect_error([&] { Corpus::load(en, f.dir / "blank.de", f.vocab); },
               {"blank.de:42:", "empty line"});
  CorpusOptions skip;
  skip.skip_empty_lines = true;
  const Corpus skipped = Corpus::load(en, f.dir / "blank.de", f.vocab, skip);
  EXPECT_EQ(skipped.size(), 299);
  EXPECT_EQ(skipped.stats().empty_skipped, 1);
  EXPECT_EQ(ids(skipped.source(41)), f.vocab.encode(f.en[42]));

  lines = f.en;
  lines[99] = std::string(70000, 'a');
  write_text(f.dir / "long.en", joined_lines(lines));
  expect_error([&] { Corpus::load(f.dir / "long.en", de, f.vocab); },
               {"long.en:100:", "longer than the limit of 65536 bytes"});
  CorpusOptions larger;
  larger.max_line_bytes = 80000;
  larger.max_length = 0;
  EXPECT_EQ(Corpus::load(f.dir / "long.en", de, f.vocab, larger).size(), 300);

  write_text(f.dir / "corrupt.gz", std::string("\x1f\x8b\x08\x00garbage-garbage-garbage", 27));
  expect_error([&] { Corpus::load(f.dir / "corrupt.gz", de, f.vocab); }, {"corrupt.gz"});
}

TEST(Corpus, SkipsAndCountsPairsOverMaxLength) {
  Fixture f;
  // The limit: the median of the longer side of each pair as the model sees it (target + 1).
  std::vector<int64_t> longest;
  for (size_t i = 0; i < f.en.size(); ++i)
    longest.push_back(std::max(f.vocab.encode(f.en[i]).size(), f.vocab.encode(f.de[i]).size() + 1));
  std::vector<int64_t> sorted = longest;
  std::sort(sorted.begin(), sorted.end());
  const int64_t limit = sorted[sorted.size() / 2];
  const int64_t expected_kept =
      std::count_if(longest.begin(), longest.end(), [limit](int64_t n) { return n <= limit; });
  ASSERT_GT(expected_kept, 100);
  ASSERT_LT(expected_kept, 250);

  CorpusOptions options;
  options.max_length = limit;
  const Corpus corpus = Corpus::load(f.dir / "en.txt", f.dir / "de.txt", f.vocab, options);
  EXPECT_EQ(corpus.size(), expected_kept);
  EXPECT_EQ(corpus.stats().too_long_skipped, 300 - expected_kept);
  EXPECT_LE(corpus.stats().longest_source, limit);
  EXPECT_LE(corpus.stats().longest_target, limit - 1);
  // The kept pairs are the short ones, in file order.
  int64_t k = 0;
  for (size_t i = 0; i < f.en.size(); ++i) {
    if (longest[i] > limit) continue;
    ASSERT_LT(k, corpus.size());
    EXPECT_EQ(ids(corpus.source(k)), f.vocab.encode(f.en[i]));
    EXPECT_EQ(ids(corpus.target(k)), f.vocab.encode(f.de[i]));
    ++k;
  }
}

TEST(Corpus, CacheIsReusedAndMissedWhenAnInputChanges) {
  Fixture f;
  CorpusOptions options;
  options.cache_dir = f.dir / "cache";
  const auto en = f.dir / "en.txt", de = f.dir / "de.txt";
  const Corpus first = Corpus::load(en, de, f.vocab, options);
  EXPECT_FALSE(first.stats().from_cache);
  ASSERT_TRUE(std::filesystem::exists(first.stats().cache_file));
  EXPECT_EQ(first.stats().cache_file.parent_path(), options.cache_dir);

  const Corpus second = Corpus::load(en, de, f.vocab, options);
  EXPECT_TRUE(second.stats().from_cache);
  EXPECT_EQ(second.stats().cache_file, first.stats().cache_file);
  expect_same(second, first);
  EXPECT_EQ(second.stats().source_tokens, first.stats().source_tokens);

  // Another max_length filters the cached pairs: still a hit.
  options.max_length = 10;
  const Corpus filtered = Corpus::load(en, de, f.vocab, options);
  EXPECT_TRUE(filtered.stats().from_cache);
  EXPECT_GT(filtered.stats().too_long_skipped, 0);
  options.max_length = 256;

  // An edited input (same length, other words; a later modification time) misses the cache.
  auto edited = f.de;
  std::swap(edited[0], edited[1]);
  write_text(de, joined_lines(edited));
  std::filesystem::last_write_time(de,
                                   std::filesystem::last_write_time(de) + std::chrono::seconds(2));
  const Corpus changed = Corpus::load(en, de, f.vocab, options);
  EXPECT_FALSE(changed.stats().from_cache);
  EXPECT_NE(changed.stats().cache_file, first.stats().cache_file);
  EXPECT_EQ(ids(changed.target(0)), ids(first.target(1)));
  EXPECT_TRUE(Corpus::load(en, de, f.vocab, options).stats().from_cache);

  // Another vocabulary misses it too.
  TempDir other_dir;  // train_tiny_vocab rewrites its directory's en.txt and de.txt
  const Vocabulary other(train_tiny_vocab(other_dir, 90));
  const Corpus other_vocab = Corpus::load(en, de, other, options);
  EXPECT_FALSE(other_vocab.stats().from_cache);
  EXPECT_EQ(ids(other_vocab.source(5)), other.encode(f.en[5]));

  // A damaged cache file is rebuilt, not trusted.
  const auto file = changed.stats().cache_file;
  std::string bytes = read_text(file);
  write_text(file, bytes.substr(0, bytes.size() - 20));
  const Corpus rebuilt = Corpus::load(en, de, f.vocab, options);
  EXPECT_FALSE(rebuilt.stats().from_cache);
  expect_same(rebuilt, changed);
  EXPECT_EQ(read_text(file), bytes);
  // No temporary files are left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(options.cache_dir)) {
    EXPECT_EQ(entry.path().extension(), ".tfmcorpus") << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 3);
}

TEST(LineReader, LinesCountsAndLimits) {
  TempDir dir;
  write_text(dir / "a.txt", "one\ntwo\r\n\nfour");
  LineReader reader(dir / "a.txt");
  std::string line;
  std::vector<std::string> got;
  while (reader.next(line)) got.push_back(line);
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "", "four"}));
  EXPECT_EQ(reader.line_number(), 4);

  // Lines longer than the reader's buffer, and counting the rest of a file.
  std::string big;
  for (int i = 0; i < 50; ++i) big += std::string(100000 + i, 'x') + "\n";
  write_gzip(dir / "big.gz", big + "tail");
  LineReader unlimited(dir / "big.gz", 0);
  ASSERT_TRUE(unlimited.next(line));
  EXPECT_EQ(line.size(), 100000u);
  ASSERT_TRUE(unlimited.next(line));
  EXPECT_EQ(line.size(), 100001u);
  EXPECT_EQ(unlimited.count_to_end(), 51);
  LineReader limited(dir / "big.gz", 100000);
  ASSERT_TRUE(limited.next(line));
  expect_error([&] { limited.next(line); }, {"big.gz:2:", "longer than the limit of 100000 bytes"});
}

// A gzip file cut short reads without complaint from zlib's gzread (it returns 0 at the cut, as at
// a real end): every reader must report it, naming the file and the line reached.
TEST(LineReader, TruncatedOrCorruptGzipIsAnError) {
  TempDir dir;
  const std::string text = joined_lines(generated_sentences(100, false, 5));
  write_gzip(dir / "full.gz", text);
  const std::string bytes = read_text(dir / "full.gz");
  write_text(dir / "cut.gz", bytes.substr(0, bytes.size() * 3 / 10));
  std::string line;
  {
    LineReader reader(dir / "cut.gz");
    int64_t lines = 0;
    expect_error(
        [&] {
          while (reader.next(line)) ++lines;
        },
        {"cut.gz", "gzip stream ends early after line", "truncated or corrupt"});
    EXPECT_GT(lines, 0);
    EXPECT_LT(lines, 100);
    expect_error([&] { LineReader(dir / "cut.gz").count_to_end(); }, {"cut.gz", "ends early"});
  }
  expect_error([&] { read_text_lines(dir / "cut.gz"); }, {"cut.gz", "ends early"});
  // The corpus reader (training data) reads through LineReader too.
  Fixture f;
  write_gzip(f.dir / "en.gz", read_text(f.dir / "en.txt"));
  const std::string en = read_text(f.dir / "en.gz");
  write_text(f.dir / "en.gz", en.substr(0, en.size() * 3 / 10));
  expect_error([&] { Corpus::load(f.dir / "en.gz", f.dir / "de.txt", f.vocab); },
               {"en.gz", "ends early"});
  // A damaged trailer (CRC-32 of the data) is a corrupt stream.
  std::string damaged = bytes;
  damaged[damaged.size() - 6] = static_cast<char>(damaged[damaged.size() - 6] ^ 0x5a);
  write_text(dir / "damaged.gz", damaged);
  expect_error([&] { read_text_lines(dir / "damaged.gz"); }, {"damaged.gz", "cannot read"});
  // The whole file still reads in full.
  EXPECT_EQ(read_text_lines(dir / "full.gz").size(), 100u);
}

// zlib's gzread ignores whatever follows a gzip member when it is not another member; gzip -d
// warns "trailing garbage ignored". tfm refuses it, and reads concatenated members as gzip does.
TEST(LineReader, ConcatenatedGzipMembersReadAndTrailingGarbageIsAnError) {
  TempDir dir;
  write_gzip(dir / "a.gz", "one\ntwo\n");
  write_gzip(dir / "b.gz", "three\nfour");
  const std::string a = read_text(dir / "a.gz"), b = read_text(dir / "b.gz");
  write_text(dir / "both.gz", a + b);  // cat a.gz b.gz > both.gz
  EXPECT_EQ(read_text_lines(dir / "both.gz"),
            (std::vector<std::string>{"one", "two", "three", "four"}));
  EXPECT_EQ(LineReader(dir / "both.gz").count_to_end(), 4);
  // An empty member between two others gives no line.
  write_gzip(dir / "empty.gz", "");
  write_text(dir / "three.gz", a + read_text(dir / "empty.gz") + b);
  EXPECT_EQ(read_text_lines(dir / "three.gz").size(), 4u);

  const std::string at = "from byte " + std::to_string(a.size());
  for (const std::string& garbage : {std::string("junk after the data\n"), std::string("x"),
                                     std::string(16, '\0'), std::string("\x1f")}) {
    SCOPED_TRACE(garbage.size());
    write_text(dir / "garbage.gz", a + garbage);
    expect_error([&] { read_text_lines(dir / "garbage.gz"); },
                 {"garbage.gz", at, "trailing garbage"});
    expect_error([&] { LineReader(dir / "garbage.gz").count_to_end(); },
                 {"garbage.gz", "trailing garbage"});
  }
  // Garbage after a second member names where it starts.
  write_text(dir / "late.gz", a + b + "junk");
  expect_error([&] { read_text_lines(dir / "late.gz"); },
               {"late.gz", "from byte " + std::to_string(a.size() + b.size()), "trailing garbage"});
  // A second member cut short is still a truncated file.
  write_text(dir / "cut2.gz", a + b.substr(0, b.size() - 4));
  expect_error([&] { read_text_lines(dir / "cut2.gz"); }, {"cut2.gz", "ends early"});
}

// A loop of symbolic links given as input (`tfm translate -i`) said "No such file or directory":
// it is named as a loop, a directory as a directory; a device such as /dev/null still reads.
TEST(LineReader, ALoopOfLinksOrADirectoryIsNamedForWhatItIs) {
  TempDir dir;
  const auto loop = dir / "loop.txt";
  std::filesystem::create_symlink("loop.txt", loop);
  EXPECT_EQ(error_of([&] { read_text_lines(loop); }),
            "cannot open '" + loop.string() + "': Too many levels of symbolic links");
  EXPECT_EQ(error_of([&] { LineReader reader(loop); }),
            "corpus file '" + loop.string() + "': Too many levels of symbolic links");
  EXPECT_EQ(error_of([&] { read_text_lines(dir.path()); }),
            "cannot open '" + dir.path().string() + "': is a directory");
  EXPECT_EQ(error_of([&] { read_text_lines(dir / "none.txt"); }),
            "cannot open '" + (dir / "none.txt").string() + "': No such file or directory");
  EXPECT_TRUE(read_text_lines("/dev/null").empty());
}

TEST(Utf8, FindsTheFirstMalformedByte) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("Straße, Größe, 日本, 😀"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);            // stray continuation byte
  EXPECT_EQ(find_invalid_utf8("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(find_invalid_utf8("a\xe0\x80\xaf"), 1u);     // overlong, 3 bytes
  EXPECT_EQ(find_invalid_utf8("ab\xed\xa0\x80"), 2u);    // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("xyz\xe6\x97"), 3u);       // truncated at the end
  EXPECT_EQ(find_invalid_utf8("\xe6\x97\x41"), 0u);      // bad continuation
  EXPECT_EQ(find_invalid_utf8("\xff"), 0u);
}

TEST(Corpus, CommandLineReportsCorpusAndBatches) {
  Fixture f;
  const CommandResult run =
      run_tfm_command("corpus --src '" + (f.dir / "en.txt").string() + "' --tgt '" +
                          (f.dir / "de.txt").string() + "' --vocab '" + f.model.string() +
                          "' --cache-dir '" + (f.dir / "cache").string() + "' --max-tokens 400",
                      f.dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.out.find("300 pairs of 300 lines"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("budget 400 padded tokens"), std::string::npos) << run.out;
  const CommandResult again = run_tfm_command(
      "corpus --src '" + (f.dir / "en.txt").string() + "' --tgt '" + (f.dir / "de.txt").string() +
          "' --vocab '" + f.model.string() + "' --cache-dir '" + (f.dir / "cache").string() + "'",
      f.dir);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("mapped from"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace tfm::internal::testing
