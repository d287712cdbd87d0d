// The one text-translation pipeline every caller shares (tfm translate, tfm::Translator, the
// server, the sweep, validation during training, tfm attention): raw text in, encoded by the
// model's SentencePiece vocabulary, held to the maximum input length (the length policy), searched
// (decode/: a Search the caller gives, so that each keeps its own worker, queue or thread count),
// detokenized, with n-best lists and word alignments, and written as the output lines of `tfm
// translate` (docs/DECODING.md). Chunked file translation is in file_translation.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/decode/search.h"

namespace tfm::internal::translation {

// A source's n best hypotheses, best first (empty for an empty source).
using NBest = std::vector<decode::Hypothesis>;

// A search over sources given as subword ids, none of them empty: per source its n-best list, in
// input order (decode::translate, a decode::Translator, a server's batching queue).
using Search = std::function<std::vector<NBest>(const std::vector<std::vector<int32_t>>&)>;

// What becomes of a source longer than the maximum input length: the encoder's attention grows
// with the square of the length, and learned positions end at max_positions.
enum class LongInputs {
  reject,    // an error naming the source
  truncate,  // cut to the maximum, with a warning on stderr naming the source
  cut,       // cut to the maximum silently (a validation score should not end a training run)
};

struct LengthPolicy {
  int64_t max_input = 0;  // tokens (decode::max_input_length)
  LongInputs long_inputs = LongInputs::reject;
};

// "<where> N subword tokens, more than the maximum input length M": the one-line error of a source
// too long; `where` names it with its own punctuation ("file.txt:3:", "sentence 2:").
std::string too_long_message(const std::string& where, size_t tokens, int64_t max_input);

// Holds `ids` to the policy; `where` names the source in the error or warning. Returns whether the
// source was cut.
bool apply_length_policy(std::vector<int32_t>& ids, const LengthPolicy& policy,
                         const std::string& where);

// Encodes every line and holds each to the policy (before anything is translated); a line i is
// named "<name>:<i + 1>:". `truncated` (when given) counts the lines cut.
std::vector<std::vector<int32_t>> encode_lines(const data::Vocabulary& vocab,
                                               const std::vector<std::string>& lines,
                                               const LengthPolicy& policy, const std::string& name,
                                               int64_t* truncated = nullptr);

// Searches the non-empty sources only; an empty source's n-best list stays empty (it translates to
// an empty line). Results in input order.
std::vector<NBest> translate_nonempty(const std::vector<std::vector<int32_t>>& sources,
                                      const Search& search);

// The subword pieces of token ids.
std::vector<std::string> pieces(const data::Vocabulary& vocab, const std::vector<int32_t>& ids);

// A hypothesis's text (detokenized), and the best one's of an n-best list (empty when none).
std::string hypothesis_text(const data::Vocabulary& vocab, const decode::Hypothesis& h);
std::string best_text(const data::Vocabulary& vocab, const NBest& nbest);

// The Pharaoh word alignment ("0-0 1-2 ...", source word - target word) of hypothesis `h` of
// `source` (ids), from its encoder-decoder attention: each target word to the source word it
// attends to most, or with threshold > 0 to every source word with at least that much attention.
std::string word_alignment(const data::Vocabulary& vocab, const std::vector<int32_t>& source,
                           const decode::Hypothesis& h, double threshold);

// The shape of `tfm translate`'s output lines.
struct LineFormat {
  bool n_best = false;     // "line ||| translation ||| score" for each of the n best
  bool alignment = false;  // append " ||| " and the word alignment
  double alignment_threshold = 0.0;
};

// The output lines of input line `line` (0-based), whose source is `source` and n-best list
// `nbest` (nullptr or empty: an empty source). Without n_best one line: the best translation (an
// empty line for none); with n_best a line per hypothesis (none for an empty source).
std::string output_lines(const data::Vocabulary& vocab, size_t line,
                         const std::vector<int32_t>& source, const NBest* nbest,
                         const LineFormat& format);

}  // namespace tfm::internal::translation
