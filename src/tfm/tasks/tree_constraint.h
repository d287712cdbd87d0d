// The parser's search constraint (decode/constraint.h): a hypothesis may only grow into a sequence
// that data::delinearise accepts over the sentence's words, within the search's maximum length.
// The tokens of the scheme (data/tree_sequences.h) are "XX" (a word's preterminal), "(L" (open a
// constituent labelled L) and ")L" (close it); the TOP root is not written, so the top level is a
// sequence of constituents and XXs. A state keeps the open constituents (label, whether it has a
// child yet), the words left and the tokens produced, and allows next:
//   XX       while a word is left;
//   (L       while a word is left (a constituent needs a child, so one must remain), the tree is
//            less than kMaxTreeDepth deep, and the output could still end within the maximum length
//            after it (2 tokens more than without it: itself and its ")L");
//   )L       when the innermost open constituent is L and has a child;
//   eos      when every word is placed and every bracket closed.
// A state of w words left and d open constituents after n tokens needs w + d + 1 more (its XXs, its
// closes, eos) at the least; every allowed token keeps n + w + d + 1 <= max_length, so a
// hypothesis can always end in time, and the last token it may write is eos.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/decode/constraint.h"

namespace tfm::internal::tasks {

// The tokens of the scheme among a vocabulary's pieces.
struct TreeTokens {
  int32_t placeholder = -1;             // "XX"
  std::vector<int32_t> opens;           // "(L" per label (only labels whose ")L" is a piece too)
  std::vector<int32_t> closes;          // ")L", closes[i] closing opens[i]
  std::vector<int32_t> label_of_open;   // per id: the label index of an "(L", or -1
  std::vector<int32_t> label_of_close;  // per id: the label index of a ")L", or -1

  // From the pieces of a vocabulary, by id, as it spells them: a scheme token is a whole word, so
  // its piece starts with SentencePiece's word boundary "▁" (U+2581); a piece without it (the
  // middle of a word) is never a token of the tree. `name` is what the error for a vocabulary
  // without "▁XX" calls it.
  static TreeTokens from_pieces(const std::vector<std::string>& pieces, const std::string& name);
  static TreeTokens from_vocabulary(const data::Vocabulary& vocab);
};

class TreeConstraint final : public decode::Constraint {
 public:
  // word_counts[s]: the words of source s (as decode::translate numbers its sources).
  TreeConstraint(std::shared_ptr<const TreeTokens> tokens, std::vector<int64_t> word_counts);
  std::unique_ptr<decode::ConstraintState> start(int64_t source, int64_t max_length) const override;

 private:
  std::shared_ptr<const TreeTokens> tokens_;
  std::vector<int64_t> word_counts_;
};

}  // namespace tfm::internal::tasks
