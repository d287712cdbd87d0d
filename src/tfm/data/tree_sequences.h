// Trees as token sequences, the target side of parsing as translation (Vinyals et al. 2015,
// "Grammar as a Foreign Language"): a depth-first walk writes "(LABEL" on entering a constituent
// and ")LABEL" on leaving it, and every preterminal (a POS tag over a word) as the placeholder
// "XX". The TOP root is left out (every tree has it). So
//   (TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))
// is "(S (NP XX XX )NP (VP XX )VP XX )S". The output never copies a word: the words (and the tags,
// where known) are put back from the input, and a sequence is a tree over exactly those words only
// when it is well formed; repair() makes one of any sequence. docs/PARSING.md gives the reasons.
// The lexicalised scheme (TreeLeaves::words, He & Choi 2023) writes each preterminal as its word
// instead, "(S (NP The cat )NP (VP sat )VP . )S"; it is read back by placeholder_leaves() first,
// so the words and tags still come from the input, never from the output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/data/trees.h"

namespace tfm::internal::data {

inline constexpr std::string_view kPreterminalPlaceholder = "XX";
// The tag written where the input gives none and the word is not punctuation (see guess_tag).
inline constexpr std::string_view kUnknownTag = "XX";

// What a sequence writes for a preterminal: the placeholder XX, or the word (escape_word'ed; the
// model configuration's tree_leaves "xx" or "words").
enum class TreeLeaves { placeholder, words };
// "xx" or "words" (ModelConfig::tree_leaves, tfm linearise --leaves); anything else throws.
TreeLeaves tree_leaves_named(std::string_view name);

// The sequence of a tree (normalised or not: the root's label, if any, is left out; a tree with
// a root other than TOP or "" keeps it, as normalise() would put TOP above it). The empty tree is
// the empty sequence.
std::string linearise(const Tree& tree, TreeLeaves leaves = TreeLeaves::placeholder);

// A lexicalised sequence in the placeholder scheme: every token that is not a bracket (a bracket
// starts with "(" or ")" and is longer than that; an escaped word never starts so) becomes XX.
std::string placeholder_leaves(std::string_view sequence);

// The tree of a well-formed sequence over `words` (tags[i] the POS tag of words[i]; tags may be
// empty, then guess_tag). Well formed: brackets balanced, each ")X" closing the innermost open
// "(X", every constituent with at least one child, nothing outside a constituent but "XX",
// exactly one "XX" per word, and no deeper than kMaxTreeDepth (TOP and the preterminals counted).
// Returns nullopt otherwise. The result's root is TOP.
std::optional<Tree> delinearise(std::string_view sequence, const std::vector<std::string>& words,
                                const std::vector<std::string>& tags = {});

struct Repaired {
  Tree tree;
  int64_t edits =
      0;  // tokens dropped + brackets closed or removed + words attached; 0: well formed
};

// A tree over exactly `words` from any sequence, changed as little as this greedy walk does:
// unknown tokens are dropped; ")X" with no open "(X" is dropped, and one that matches an outer
// "(X" first closes those inside it; an "XX" beyond the last word is dropped; words left over
// when the sequence ends join the innermost open constituent (or the root); brackets still open
// are closed; constituents left without children are removed; an "(X" that would nest deeper
// than kMaxTreeDepth is dropped. Each change counts one edit.
Repaired repair(std::string_view sequence, const std::vector<std::string>& words,
                const std::vector<std::string>& tags = {});

// The Penn Treebank tag that a punctuation token always has ("," "." ":" "``" "''" "-LRB-"
// "-RRB-" "#" "$"), or kUnknownTag: evalb deletes punctuation by its tag, so a tree without the
// input's tags still scores like one with them.
std::string guess_tag(std::string_view word);

// A word as a tree leaf: brackets, which a bracketed tree cannot hold, become the treebank's
// -LRB- -RRB- -LCB- -RCB- -LSB- -RSB- (a word that is only a bracket) or are replaced inside a
// word the same way.
std::string escape_word(std::string_view word);

// The words of tokenised text (split at spaces and tabs), each escaped as above.
std::vector<std::string> split_words(std::string_view text);

// Penn Treebank tokenisation of raw English text (the rules of the treebank's tokenizer.sed):
// punctuation split off, quotes as `` and '', clitics ('s 'll n't ...) split, brackets escaped.
std::vector<std::string> ptb_tokenize(std::string_view text);

}  // namespace tfm::internal::data
