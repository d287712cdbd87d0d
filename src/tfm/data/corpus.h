// A parallel corpus encoded into subword ids: read from two aligned text files (plain or gzip),
// checked line by line, encoded once with the vocabulary and cached in a binary file so that a
// second run loads it without reading or encoding the text again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/io/text_reader.h"

namespace tfm::data {

struct CorpusOptions {
  // A line longer than this (in bytes) is an error naming file and line; <= 0: no limit.
  int64_t max_line_bytes = kDefaultMaxLineBytes;
  // An empty (or blank) line on either side is an error; when true the pair is skipped and counted.
  bool skip_empty_lines = false;
  // The longest sequence the model may see, in subword tokens: a pair is kept when its source has
  // at most max_length tokens and its target at most max_length - 1 (tgt_in = bos y, tgt_out =
  // y eos). Longer pairs are skipped and counted. <= 0: no limit.
  int64_t max_length = 256;
  // Where the encoded corpus is cached; empty: no cache.
  std::filesystem::path cache_dir;
};

struct CorpusStats {
  int64_t lines = 0;             // line pairs in the files
  int64_t empty_skipped = 0;     // pairs with an empty line (skip_empty_lines)
  int64_t too_long_skipped = 0;  // pairs over max_length
  int64_t pairs = 0;             // pairs kept
  int64_t source_tokens = 0;     // subword tokens of the kept pairs, without bos/eos
  int64_t target_tokens = 0;
  int64_t unknown_tokens = 0;  // unk ids among them (source and target)
  int64_t longest_source = 0;
  int64_t longest_target = 0;
  bool from_cache = false;           // loaded from the cache file (else read and encoded)
  std::filesystem::path cache_file;  // empty without a cache
  double seconds = 0;

  // One line: counts, skipped pairs, tokens, cache use.
  std::string summary() const;
};

class Corpus {
 public:
  Corpus() = default;

  // Reads source and target (plain or .gz), checks them, encodes them with `vocab` (or loads them
  // from the cache) and drops the pairs over options.max_length. Throws tfm::Error naming file and
  // line on a missing file, unequal line counts, invalid UTF-8, an empty or an over-long line.
  static Corpus load(const std::filesystem::path& source, const std::filesystem::path& target,
                     const Vocabulary& vocab, const CorpusOptions& options = {});

  // A corpus of given id sequences (no bos/eos), e.g. for tests; every sequence must be
  // non-empty.
  static Corpus from_pairs(
      const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& pairs);

  int64_t size() const { return static_cast<int64_t>(offsets_.size() / 2); }
  std::span<const int32_t> source(int64_t i) const { return span(2 * i); }
  std::span<const int32_t> target(int64_t i) const { return span(2 * i + 1); }
  int64_t source_length(int64_t i) const { return offsets_[2 * i + 1] - offsets_[2 * i]; }
  int64_t target_length(int64_t i) const { return offsets_[2 * i + 2] - offsets_[2 * i + 1]; }
  const CorpusStats& stats() const { return stats_; }

  // Appends one pair (no bos/eos).
  void add(std::span<const int32_t> source, std::span<const int32_t> target);

 private:
  friend struct CorpusCacheAccess;
  std::span<const int32_t> span(int64_t k) const {
    return {tokens_.data() + offsets_[k], static_cast<size_t>(offsets_[k + 1] - offsets_[k])};
  }

  std::vector<int32_t> tokens_;
  // Source i is tokens_[offsets_[2i], offsets_[2i+1]), target i is [offsets_[2i+1],
  // offsets_[2i+2]).
  std::vector<int64_t> offsets_ = {0};
  CorpusStats stats_;
};

}  // namespace tfm::data
