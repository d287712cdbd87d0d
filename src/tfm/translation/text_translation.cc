#include "tfm/translation/text_translation.h"

#include <cstdio>
#include <sstream>

#include "tfm/core/error.h"
#include "tfm/decode/alignment.h"

namespace tfm::internal::translation {

std::string too_long_message(const std::string& where, size_t tokens, int64_t max_input) {
  return fmt::format("{} {} subword tokens, more than the maximum input length {}", where, tokens,
                     max_input);
}

bool apply_length_policy(std::vector<int32_t>& ids, const LengthPolicy& policy,
                         const std::string& where) {
  if (static_cast<int64_t>(ids.size()) <= policy.max_input) return false;
  TFM_CHECK(policy.long_inputs != LongInputs::reject, "{}",
            too_long_message(where, ids.size(), policy.max_input));
  if (policy.long_inputs == LongInputs::truncate)
    std::fprintf(stderr, "tfm: warning: %s %zu subword tokens, truncated to %lld\n", where.c_str(),
                 ids.size(), static_cast<long long>(policy.max_input));
  ids.resize(static_cast<size_t>(policy.max_input));
  return true;
}

std::vector<std::vector<int32_t>> encode_lines(const data::Vocabulary& vocab,
                                               const std::vector<std::string>& lines,
                                               const LengthPolicy& policy, const std::string& name,
                                               int64_t* truncated) {
  std::vector<std::vector<int32_t>> encoded(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    encoded[i] = vocab.encode(lines[i]);
    if (static_cast<int64_t>(encoded[i].size()) <= policy.max_input) continue;
    const bool cut = apply_length_policy(encoded[i], policy, fmt::format("{}:{}:", name, i + 1));
    if (cut && truncated) ++*truncated;
  }
  return encoded;
}

std::vector<NBest> translate_nonempty(const std::vector<std::vector<int32_t>>& sources,
                                      const Search& search) {
  std::vector<std::vector<int32_t>> searched;
  std::vector<size_t> positions;  // searched[k] is sources[positions[k]]
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].empty()) continue;
    searched.push_back(sources[i]);
    positions.push_back(i);
  }
  std::vector<NBest> results(sources.size());
  if (searched.empty()) return results;
  std::vector<NBest> found = search(searched);
  for (size_t k = 0; k < found.size(); ++k) results[positions[k]] = std::move(found[k]);
  return results;
}

std::vector<std::string> pieces(const data::Vocabulary& vocab, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const int32_t id : ids) out.push_back(vocab.piece(id));
  return out;
}

std::string hypothesis_text(const data::Vocabulary& vocab, const decode::Hypothesis& h) {
  return vocab.decode(h.tokens);
}

std::string best_text(const data::Vocabulary& vocab, const NBest& nbest) {
  return nbest.empty() ? std::string() : hypothesis_text(vocab, nbest.front());
}

std::string word_alignment(const data::Vocabulary& vocab, const std::vector<int32_t>& source,
                           const decode::Hypothesis& h, double threshold) {
  return decode::pharaoh(decode::align_translation(h.attention, pieces(vocab, source),
                                                   pieces(vocab, h.tokens), threshold));
}

std::string output_lines(const data::Vocabulary& vocab, size_t line,
                         const std::vector<int32_t>& source, const NBest* nbest,
                         const LineFormat& format) {
  const bool translated = nbest && !nbest->empty();
  auto aligned = [&](const decode::Hypothesis& h) {
    return format.alignment ? " ||| " + word_alignment(vocab, source, h, format.alignment_threshold)
                            : std::string();
  };
  std::ostringstream out;  // the scores as an ostream writes a double (6 significant digits)
  if (!format.n_best) {
    if (translated)
      out << hypothesis_text(vocab, nbest->front()) << aligned(nbest->front()) << "\n";
    else
      out << (format.alignment ? " ||| " : "") << "\n";
  } else if (nbest) {
    for (const decode::Hypothesis& h : *nbest)
      out << line << " ||| " << hypothesis_text(vocab, h) << " ||| " << h.score << aligned(h)
          << "\n";
  }
  return out.str();
}

}  // namespace tfm::internal::translation
