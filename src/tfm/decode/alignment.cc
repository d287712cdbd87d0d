#include "tfm/decode/alignment.h"

#include <algorithm>

#include "tfm/core/error.h"

namespace tfm::internal::decode {

namespace {

constexpr std::string_view kWordMark = "\xE2\x96\x81";  // U+2581, SentencePiece's word start
constexpr std::string_view kUnknownPiece = "<unk>";     // data::kUnkPiece (decode/ reads no data/)

bool special(const std::string& piece) {
  return piece.size() >= 3 && piece.front() == '<' && piece.back() == '>';
}

int64_t count_words(const std::vector<int64_t>& word_of) {
  return word_of.empty() ? 0 : word_of.back() + 1;
}

}  // namespace

std::vector<int64_t> word_of_pieces(const std::vector<std::string>& pieces, bool unknown_in_words) {
  std::vector<int64_t> word_of(pieces.size());
  int64_t word = -1;
  bool after_special = true;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const bool is_special = special(pieces[i]) && !(unknown_in_words && pieces[i] == kUnknownPiece);
    const bool starts = is_special || after_special || pieces[i].starts_with(kWordMark);
    if (starts) ++word;
    word_of[i] = word;
    after_special = is_special;
  }
  return word_of;
}

std::vector<std::string> join_words(const std::vector<std::string>& pieces,
                                    const std::vector<int64_t>& word_of) {
  TFM_CHECK(pieces.size() == word_of.size(), "join_words: {} pieces but {} word indices",
            pieces.size(), word_of.size());
  std::vector<std::string> words(static_cast<size_t>(count_words(word_of)));
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string piece = pieces[i];
    if (piece.starts_with(kWordMark)) piece.erase(0, kWordMark.size());
    words[static_cast<size_t>(word_of[i])] += piece;
  }
  return words;
}

std::vector<float> merge_to_words(const std::vector<float>& weights,
                                  const std::vector<int64_t>& query_words,
                                  const std::vector<int64_t>& key_words) {
  const auto Q = static_cast<int64_t>(query_words.size());
  const auto K = static_cast<int64_t>(key_words.size());
  TFM_CHECK(static_cast<int64_t>(weights.size()) == Q * K,
            "merge_to_words: {} weights for {} x {} pieces", weights.size(), Q, K);
  const int64_t WQ = count_words(query_words), WK = count_words(key_words);
  std::vector<double> sums(static_cast<size_t>(WQ * WK), 0.0);
  std::vector<int64_t> pieces_of(static_cast<size_t>(WQ), 0);
  for (int64_t q = 0; q < Q; ++q) {
    const int64_t wq = query_words[static_cast<size_t>(q)];
    ++pieces_of[static_cast<size_t>(wq)];
    for (int64_t k = 0; k < K; ++k)
      sums[static_cast<size_t>(wq * WK + key_words[static_cast<size_t>(k)])] +=
          weights[static_cast<size_t>(q * K + k)];
  }
  std::vector<float> merged(sums.size());
  for (int64_t wq = 0; wq < WQ; ++wq)
    for (int64_t wk = 0; wk < WK; ++wk) {
      const auto i = static_cast<size_t>(wq * WK + wk);
      merged[i] =
          static_cast<float>(sums[i] / static_cast<double>(pieces_of[static_cast<size_t>(wq)]));
    }
  return merged;
}

Alignment align_words(const std::vector<float>& weights, int64_t target_words, int64_t source_words,
                      double threshold) {
  TFM_CHECK(static_cast<int64_t>(weights.size()) == target_words * source_words,
            "align_words: {} weights for {} x {} words", weights.size(), target_words,
            source_words);
  Alignment alignment;
  for (int64_t t = 0; t < target_words; ++t) {
    const float* row = weights.data() + t * source_words;
    if (threshold <= 0) {
      if (source_words > 0)
        alignment.emplace_back(std::max_element(row, row + source_words) - row, t);
      continue;
    }
    for (int64_t s = 0; s < source_words; ++s)
      if (row[s] >= threshold) alignment.emplace_back(s, t);
  }
  return alignment;
}

Alignment align_translation(const std::vector<std::vector<float>>& attention,
                            const std::vector<std::string>& source_pieces,
                            const std::vector<std::string>& target_pieces, double threshold) {
  TFM_CHECK(attention.size() >= target_pieces.size(),
            "align_translation: attention for {} tokens but {} target pieces", attention.size(),
            target_pieces.size());
  const size_t S = source_pieces.size();
  std::vector<float> weights;
  weights.reserve(target_pieces.size() * S);
  for (size_t t = 0; t < target_pieces.size(); ++t) {
    TFM_CHECK(attention[t].size() == S,
              "align_translation: token {} has weights over {} source positions, not {}", t,
              attention[t].size(), S);
    weights.insert(weights.end(), attention[t].begin(), attention[t].end());
  }
  const std::vector<int64_t> target_words = word_of_pieces(target_pieces);
  const std::vector<int64_t> source_words = word_of_pieces(source_pieces, true);
  return align_words(merge_to_words(weights, target_words, source_words), count_words(target_words),
                     count_words(source_words), threshold);
}

std::string pharaoh(const Alignment& alignment) {
  std::string text;
  for (const auto& [s, t] : alignment) {
    if (!text.empty()) text += ' ';
    text += std::to_string(s) + '-' + std::to_string(t);
  }
  return text;
}

}  // namespace tfm::internal::decode
