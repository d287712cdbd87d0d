// The parser's search constraint (decode/constraint.h): a hypothesis may only grow into a sequence
// that data::delinearise accepts over the sentence's words, within the search's maximum length.
// The tokens of the scheme (data/tree_sequences.h) are a word's leaf, "(L" (open a constituent
// labelled L) and ")L" (close it); the TOP root is not written, so the top level is a sequence of
// constituents and leaves. A leaf is the piece "XX" (TreeLeaves::placeholder) or, lexicalised
// (TreeLeaves::words), the word's own pieces as the vocabulary encodes the word alone, one or more
// (leaf_pieces). A state keeps the open constituents (label, whether it has a child yet), the next
// word and how many of its pieces are written, and the tokens produced, and allows next:
//   inside a word (some but not all of its pieces written): only its next piece;
//   a leaf's first piece, for the next word, while a word is left;
//   (L       while a word is left (a constituent needs a child, so one must remain), the tree is
//            less than kMaxTreeDepth deep, and the output could still end within the maximum length
//            after it (2 tokens more than without it: itself and its ")L");
//   )L       when the innermost open constituent is L and has a child;
//   eos      when every word is placed and every bracket closed.
// A state of p leaf pieces left and d open constituents after n tokens needs p + d + 1 more (its
// pieces, its closes, eos) at the least; every allowed token keeps n + p + d + 1 <= max_length, so
// a hypothesis can always end in time, and the last token it may write is eos.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/data/tree_sequences.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/constraint.h"

namespace tfm::internal::tasks {

// The tokens of the scheme among a vocabulary's pieces.
struct TreeTokens {
  int32_t placeholder = -1;             // "XX"; -1 where a lexicalised vocabulary lacks it
  std::vector<int32_t> opens;           // "(L" per label (only labels whose ")L" is a piece too)
  std::vector<int32_t> closes;          // ")L", closes[i] closing opens[i]
  std::vector<int32_t> label_of_open;   // per id: the label index of an "(L", or -1
  std::vector<int32_t> label_of_close;  // per id: the label index of a ")L", or -1
  // The pieces a lexicalised leaf may begin with: every piece that starts a word ("▁...") and is
  // not a bracket of the scheme, and the unknown id (an unknown word's leaf).
  std::vector<int32_t> leaf_starts;

  // From the pieces of a vocabulary, by id, as it spells them: a scheme token is a whole word, so
  // its piece starts with SentencePiece's word boundary "▁" (U+2581); a piece without it (the
  // middle of a word) is never a token of the tree. `name` is what the error for a vocabulary
  // without "▁XX" calls it (the placeholder scheme needs it; the lexicalised one does not).
  static TreeTokens from_pieces(const std::vector<std::string>& pieces, const std::string& name,
                                data::TreeLeaves leaves = data::TreeLeaves::placeholder);
  static TreeTokens from_vocabulary(const data::Vocabulary& vocab,
                                    data::TreeLeaves leaves = data::TreeLeaves::placeholder);
};

// The pieces of one word: its leaf pieces, by word.
using Leaves = std::vector<std::vector<int32_t>>;

// The lexicalised leaves of a sentence's words: each word's target encoding alone
// (Vocabulary::encode_target), or the unknown id for a word that encodes to nothing. These are
// the pieces the word has inside any sequence: SentencePiece normalises the text, splits it at
// white space (split_by_whitespace, its default) and marks each word's start with "▁" (the dummy
// prefix gives the first word one too); no piece spans a "▁" except at its start, so BPE merges
// and unigram segmentation act on each word apart, and a word alone encodes as in the sentence.
Leaves leaf_pieces(const data::Vocabulary& vocab, const std::vector<std::string>& words);

// The lexicalised leaves of every source (a type of its own: a braced list of word counts must
// not read as one).
struct WordLeaves {
  std::vector<Leaves> sources;
};

class TreeConstraint final : public decode::Constraint {
 public:
  // The placeholder scheme: word_counts[s] the words of source s (as decode::translate numbers
  // its sources), each leaf the piece XX.
  TreeConstraint(std::shared_ptr<const TreeTokens> tokens, std::vector<int64_t> word_counts);
  // The lexicalised scheme: leaves.sources[s] the pieces of each word of source s (each non-empty).
  // A leaf is scored as the choice of writing a word there, not of the word (the input gives it):
  // its first piece scores log sum_{t in leaf_starts} p(t), the model's probability that some word
  // comes next, and its other pieces score 0 (decode::ConstraintState::pooled). Masking alone
  // would score the word's own probability, and a model that expects another word would rather
  // open brackets than write it.
  TreeConstraint(std::shared_ptr<const TreeTokens> tokens, const WordLeaves& leaves);
  std::unique_ptr<decode::ConstraintState> start(int64_t source, int64_t max_length) const override;

 private:
  std::shared_ptr<const TreeTokens> tokens_;
  std::vector<std::shared_ptr<const Leaves>> leaves_;  // by source
  bool pooled_ = false;                                // leaves scored as a choice (lexicalised)
};

}  // namespace tfm::internal::tasks
