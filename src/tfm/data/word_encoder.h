// Encoding a sentence one word at a time, through a memo of each word's subword ids.
//
// With the settings `tfm vocab` trains with (SentencePiece's defaults: split_by_whitespace, a dummy
// prefix, extra white space removed), no piece spans a space: BPE merges and the unigram lattice
// never cross one, and the normaliser maps each word alone as it does inside its sentence. So the
// ids of a sentence are the concatenation of the ids of its space-separated words, each encoded
// alone (with its own "▁" prefix). Corpora repeat their words (Zipf's law): a memo of each word's
// ids makes encoding several times faster than encoding every sentence whole.
//
// A vocabulary with other settings (pieces across spaces) breaks that equality; the corpus reader
// therefore compares a sample of sentences with whole-sentence encoding (matches()) and falls back
// to it on the first difference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tfm/data/vocab.h"

namespace tfm::internal::data {

class WordEncoder {
 public:
  // Remembers at most `max_words` words; then forgets them all and starts again (bounded memory).
  explicit WordEncoder(const Vocabulary& vocab, size_t max_words = size_t{1} << 20);

  // Appends the ids of `line` to `out`.
  void encode(std::string_view line, std::vector<int32_t>& out);
  // True when encode(line) equals the vocabulary's whole-sentence encoding of it.
  bool matches(std::string_view line);

  int64_t words() const { return hits_ + misses_; }
  int64_t misses() const { return misses_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  struct Span {
    uint32_t begin = 0;
    uint32_t length = 0;
  };

  const Vocabulary& vocab_;
  size_t max_words_;
  std::unordered_map<std::string, Span, Hash, std::equal_to<>> memo_;
  std::vector<int32_t> ids_;  // the memo's ids, end to end
  std::vector<int32_t> scratch_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace tfm::internal::data
