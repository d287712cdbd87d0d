// The parsing task: constituency parsing as translation (the paper's section 6.3), over decode/'s
// translation and data/'s trees (a layer above both, below eval/, api/ and cli/): the words go in
// as the source, the model writes the linearised tree (data/tree_sequences.h), and the words and
// tags are put back. With the tree constraint (tasks/tree_constraint.h, the default) the search
// writes nothing but trees over the input's words. Among a sentence's finished beam hypotheses the
// best well-formed one wins; when the beam holds none (without the constraint, or when no tree fits
// the maximum length), the best is repaired into a tree over the input's words (data::repair), and
// counted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/data/trees.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/tasks/tree_constraint.h"

namespace tfm::internal::tasks {

// The paper's decoding for parsing: beam 21, alpha 0.3, at most input + 300 output tokens.
decode::TranslateOptions paper_parse_options();

struct ParseInput {
  std::vector<std::string> words;  // tokenised, brackets escaped (data::escape_word)
  std::vector<std::string> tags;   // the words' POS tags, or empty (then data::guess_tag)
};

struct ParsedTree {
  data::Tree tree;
  double score = 0;     // the hypothesis' search score
  int64_t rank = 0;     // its place in the beam's finished hypotheses, 0-based
  int64_t repairs = 0;  // data::repair's edits; 0: the hypothesis was a well-formed tree
};

struct ParseResult {
  // Up to n_best trees, best first: the well-formed hypotheses by score, then (if fewer) repaired
  // ones. Empty for a sentence without words.
  std::vector<ParsedTree> trees;
};

struct ParseCounts {
  int64_t sentences = 0;        // with words
  int64_t best_ill_formed = 0;  // the best hypothesis was not a tree over the words
  int64_t repaired = 0;         // no hypothesis in the beam was: the output is a repaired one
};

// Parses every input (in order) with `translator` (its options' n_best is raised to its beam size
// so that every finished hypothesis is seen), under the tree constraint when `constrained` (then
// the vocabulary must hold "XX" as a piece, unless the model's tree_leaves is "words"). The model
// configuration's tree_leaves says what the model writes for a word: "xx" or the word itself. A
// sentence of more source tokens than the model accepts is an error naming its index.
std::vector<ParseResult> parse(const decode::Translator& translator, const data::Vocabulary& vocab,
                               const std::vector<ParseInput>& inputs, int64_t n_best,
                               bool constrained, ParseCounts* counts = nullptr);

// The same with a training model (validation): translate()'s one-off form, in `precision`.
std::vector<ParseResult> parse(const nn::Transformer& model,
                               const decode::TranslateOptions& options,
                               const data::Vocabulary& vocab, const std::vector<ParseInput>& inputs,
                               int64_t n_best, bool constrained, ParseCounts* counts = nullptr,
                               DType precision = DType::f32);

// A sentence's trees from its beam's finished hypotheses (sequences and scores, best first): the
// well-formed ones in order, then repaired ones, n_best at most (see ParseResult). Counts into
// `counts` when given.
ParseResult choose_trees(const std::vector<std::string>& sequences,
                         const std::vector<double>& scores, const ParseInput& input, int64_t n_best,
                         ParseCounts* counts = nullptr);

// A lexicalised hypothesis (token ids) in the placeholder scheme, for delinearise and repair:
// each run of tokens that spells the next word's leaf (leaves: tree_constraint.h's leaf_pieces)
// becomes XX, and the tokens between them are decoded as text, in which every token that is not
// a bracket is a leaf (data::placeholder_leaves). Under the constraint the tokens between words
// are brackets only; matching the pieces, not the decoded text, keeps an unknown piece inside a
// word (decoded " ⁇ ") from splitting it.
std::string placeholder_sequence(const std::vector<int32_t>& ids, const Leaves& leaves,
                                 const data::Vocabulary& vocab);

// The source text of a sentence, as the model was trained on it: the words joined by spaces.
std::string parse_source(const std::vector<std::string>& words);

}  // namespace tfm::internal::tasks
