#include "tfm/data/word_encoder.h"

namespace tfm::internal::data {

WordEncoder::WordEncoder(const Vocabulary& vocab, size_t max_words)
    : vocab_(vocab), max_words_(max_words) {
  memo_.reserve(std::min(max_words, size_t{1} << 16));
}

void WordEncoder::encode(std::string_view line, std::vector<int32_t>& out) {
  const size_t line_begin = out.size();
  size_t at = 0;
  while (at < line.size()) {
    if (line[at] == ' ') {
      ++at;
      continue;
    }
    const size_t end = std::min(line.find(' ', at), line.size());
    const std::string_view word = line.substr(at, end - at);
    at = end;
    auto found = memo_.find(word);
    if (found == memo_.end()) {
      ++misses_;
      // The pool's 32-bit offsets bound it too: forget everything well before they overflow.
      if (memo_.size() >= max_words_ || ids_.size() > (size_t{1} << 31)) {
        memo_.clear();
        ids_.clear();
      }
      const std::vector<int32_t> ids = vocab_.encode(word);
      const Span span{static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(ids.size())};
      ids_.insert(ids_.end(), ids.begin(), ids.end());
      found = memo_.emplace(std::string(word), span).first;
    } else {
      ++hits_;
    }
    const int32_t* first = ids_.data() + found->second.begin;
    const int32_t* last = first + found->second.length;
    // SentencePiece merges a run of unknown pieces into one <unk>: a run may span words (a word
    // vocabulary's unknown words).
    if (first != last && *first == kUnkId && out.size() > line_begin && out.back() == kUnkId)
      ++first;
    out.insert(out.end(), first, last);
  }
}

bool WordEncoder::matches(std::string_view line) {
  scratch_.clear();
  encode(line, scratch_);
  return scratch_ == vocab_.encode(line);
}

}  // namespace tfm::internal::data
