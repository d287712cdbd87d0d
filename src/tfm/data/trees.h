// Bracketed phrase-structure trees (Penn Treebank): reading one tree a line or multi-line .mrg
// text, writing a tree back as one line, and the normalisation parser evaluations apply
// (docs/PARSING.md).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::internal::data {

// The deepest nesting of brackets a tree may have (a preterminal is one level). The walks over a
// tree (writing, normalising, linearising, EVALB, even freeing it) recurse once per level, so the
// input must not choose the depth: a treebank's trees are a few dozen levels deep, and 1000 levels
// stay far inside a thread's stack, sanitizers' larger frames included.
inline constexpr int64_t kMaxTreeDepth = 1000;

// A node: a constituent (a label and child nodes), or a leaf (a word, no label, no children). A
// preterminal is a constituent whose only child is a leaf: its label is the word's POS tag. The
// empty tree (no label, no children, no word) stands for a sentence without a parse, "()" or an
// empty line of a one-tree-a-line file.
struct Tree {
  std::string label;  // "" only for the unlabeled outer root "( ... )" (and the empty tree)
  std::vector<Tree> children;
  std::string word;  // a leaf's word

  bool is_leaf() const { return !word.empty(); }
  bool is_preterminal() const { return children.size() == 1 && children[0].is_leaf(); }
  bool empty() const { return label.empty() && children.empty() && word.empty(); }

  static Tree leaf(std::string word);
  static Tree node(std::string label, std::vector<Tree> children);

  bool operator==(const Tree&) const = default;
};

// One tree from `text` (one or more lines; nothing but white space around it). Errors are one
// line, "NAME:LINE:COLUMN: problem": unbalanced brackets, an empty label below the root, a
// constituent without children, text outside the brackets, a word beside constituents, brackets
// nested deeper than kMaxTreeDepth.
// `first_line` is the line number of the text's first line in its file.
Tree parse_tree(std::string_view text, std::string_view name = "<tree>", int64_t first_line = 1);

// Every tree of a file's lines. When no tree spans several lines the text is one tree a line: a
// line holds exactly one tree, and an empty (or blank) line is the empty tree. Otherwise it is
// PTB .mrg text: trees follow each other across lines and blank lines separate them.
std::vector<Tree> parse_trees(const std::vector<std::string>& lines, std::string_view name);

// The trees of a file, plain or gzip-compressed (io/text_lines.h), as parse_trees reads them.
std::vector<Tree> read_tree_file(const std::filesystem::path& path);

// One line: "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat))))", the unlabeled root as "( (S ...))",
// the empty tree as "()".
std::string to_string(const Tree& tree);

// The words of the leaves, left to right, and the POS tags of the preterminals.
std::vector<std::string> tree_words(const Tree& tree);
std::vector<std::string> tree_tags(const Tree& tree);

// A label without its function tags and co-indices: "NP-SBJ-1" -> "NP", "PP-LOC=2" -> "PP",
// "NP=2" -> "NP"; a label that starts with '-' ("-NONE-", "-LRB-", "-RRB-") or '=' is kept whole.
std::string strip_function_tags(std::string_view label);

// The tree as parser evaluations use it: -NONE- empty elements removed, and every constituent
// they leave without children; function tags and co-indices stripped from every label; the root
// named TOP (an unlabeled root or TOP is renamed, any other root gets a TOP above it). A tree
// with nothing left is the empty tree.
Tree normalise(const Tree& tree);

}  // namespace tfm::internal::data
