// A parallel corpus encoded into subword ids: read from two aligned text files (plain or gzip),
// checked line by line and encoded once with the vocabulary. With a cache directory the ids are
// streamed into a binary cache file as they are made (corpus_cache.h), and the corpus is then that
// file, memory-mapped: 16-bit ids when the vocabulary allows, so that a corpus of tens of millions
// of pairs costs page cache, not the process's own memory, and a second run starts at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/io/mapped_file.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal::data {

struct CorpusOptions {
  // A line longer than this (in bytes) is an error naming file and line; <= 0: no limit.
  int64_t max_line_bytes = kDefaultMaxLineBytes;
  // An empty (or blank) line on either side is an error; when true the pair is skipped and counted.
  bool skip_empty_lines = false;
  // A line of invalid UTF-8 or longer than max_line_bytes on either side is an error; when true
  // the pair is skipped and counted, and the first few are named in progress reports (crawled
  // corpora hold a few such lines).
  bool skip_invalid_lines = false;
  // The longest sequence the model may see, in subword tokens: a pair is kept when its source has
  // at most max_length tokens and its target at most max_length - 1 (tgt_in = bos y, tgt_out =
  // y eos). Longer pairs are skipped and counted. <= 0: no limit.
  int64_t max_length = 256;
  // Where the encoded corpus is cached; empty: no cache (the ids are then held in memory).
  std::filesystem::path cache_dir;
  // Receives a one-line report every few seconds while the text is read and encoded (pairs, rate,
  // share of the input read, time left); none when empty.
  std::function<void(const std::string&)> progress;
  // Encode a word at a time through a memo (data/word_encoder.h), checked against whole-sentence
  // encoding on a sample of lines; false: every sentence whole.
  bool word_memo = true;
};

struct CorpusStats {
  int64_t lines = 0;             // line pairs in the files
  int64_t empty_skipped = 0;     // pairs with an empty line (skip_empty_lines)
  int64_t invalid_skipped = 0;   // pairs with an invalid or over-long line (skip_invalid_lines)
  int64_t too_long_skipped = 0;  // pairs over max_length
  int64_t pairs = 0;             // pairs kept
  int64_t source_tokens = 0;     // subword tokens of the kept pairs, without bos/eos
  int64_t target_tokens = 0;
  int64_t unknown_tokens = 0;  // unk ids among them (source and target)
  int64_t longest_source = 0;
  int64_t longest_target = 0;
  int64_t id_bytes = 4;              // bytes an id takes in memory or in the cache: 2 or 4
  bool word_memo = false;            // encoded a word at a time (not loaded from the cache)
  bool from_cache = false;           // loaded from the cache file (else read and encoded)
  std::filesystem::path cache_file;  // empty without a cache
  double seconds = 0;

  // One line: counts, skipped pairs, tokens, cache use.
  std::string summary() const;
};

class Corpus {
 public:
  Corpus() = default;

  // Reads source and target (plain or .gz), checks them, encodes them with `vocab` (or maps them
  // from the cache) and drops the pairs over options.max_length. Throws tfm::Error naming file and
  // line on a missing file, unequal line counts, invalid UTF-8, an empty or an over-long line.
  static Corpus load(const std::filesystem::path& source, const std::filesystem::path& target,
                     const Vocabulary& vocab, const CorpusOptions& options = {});
  // A corpus of given id sequences (no bos/eos), e.g. for tests; every sequence must be
  // non-empty.
  static Corpus from_pairs(
      const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& pairs);

  int64_t size() const { return size_; }
  int64_t source_length(int64_t i) const {
    const uint64_t k = stored(i);
    return static_cast<int64_t>(offsets()[2 * k + 1] - offsets()[2 * k]);
  }
  int64_t target_length(int64_t i) const {
    const uint64_t k = stored(i);
    return static_cast<int64_t>(offsets()[2 * k + 2] - offsets()[2 * k + 1]);
  }
  // Writes pair i's source (target) ids to out[0, length).
  void copy_source(int64_t i, int32_t* out) const { copy_ids(2 * stored(i), out); }
  void copy_target(int64_t i, int32_t* out) const { copy_ids(2 * stored(i) + 1, out); }
  std::vector<int32_t> source(int64_t i) const;
  std::vector<int32_t> target(int64_t i) const;
  const CorpusStats& stats() const { return stats_; }

  // Appends one pair (no bos/eos) to a corpus held in memory (not to a mapped one).
  void add(std::span<const int32_t> source, std::span<const int32_t> target);

 private:
  uint64_t stored(int64_t i) const {
    return kept_.empty() ? static_cast<uint64_t>(i) : kept_[static_cast<size_t>(i)];
  }
  const uint64_t* offsets() const {
    return mapped_offsets_ != nullptr ? mapped_offsets_ : offsets_.data();
  }
  void copy_ids(uint64_t sequence, int32_t* out) const;
  // Drops the pairs over max_length (<= 0: none) and fills the token statistics.
  void keep_pairs_up_to(int64_t max_length);

  // Sequence k (2i: the source of stored pair i, 2i+1: its target) is ids[offsets[k],
  // offsets[k+1]). Held in memory (from_pairs, add, a load without cache) in ids_ and offsets_;
  // or in a mapped cache file (file_ keeps it mapped, for every copy of the corpus).
  std::shared_ptr<const MappedFile> file_;
  const char* mapped_ids_ = nullptr;  // 16-bit or 32-bit ids (id_bytes_)
  const uint64_t* mapped_offsets_ = nullptr;
  int64_t id_bytes_ = 4;
  std::vector<int32_t> ids_;
  std::vector<uint64_t> offsets_ = {0};
  // Stored pair of each pair after filtering; empty when nothing was filtered (pair i = stored i).
  std::vector<uint32_t> kept_;
  int64_t size_ = 0;
  CorpusStats stats_;
};

}  // namespace tfm::internal::data
