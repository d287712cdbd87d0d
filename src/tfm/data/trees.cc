#include "tfm/data/trees.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/io/text_lines.h"

namespace tfm::internal::data {

Tree Tree::leaf(std::string word) {
  Tree tree;
  tree.word = std::move(word);
  return tree;
}

Tree Tree::node(std::string label, std::vector<Tree> children) {
  Tree tree;
  tree.label = std::move(label);
  tree.children = std::move(children);
  return tree;
}

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_terminator(char c) {
  return is_space(c) || c == '(' || c == ')';
}

// A recursive-descent reader over the whole text, which knows where each byte is (line, column)
// for its messages.
class TreeParser {
 public:
  TreeParser(std::string_view text, std::string_view name, int64_t first_line)
      : text_(text), name_(name), first_line_(first_line) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') line_starts_.push_back(i + 1);
  }

  // Skips white space; false at the end of the text.
  bool more() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
    return pos_ < text_.size();
  }
  size_t pos() const { return pos_; }

  // The 0-based line of a byte offset (relative to the text's first line).
  int64_t line_of(size_t at) const {
    return std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - line_starts_.begin() -
           1;
  }
  std::string where(size_t at) const {
    const int64_t line = line_of(at);
    return fmt::format("{}:{}:{}", name_, first_line_ + line,
                       at - line_starts_[static_cast<size_t>(line)] + 1);
  }

  // The tree that starts at the current position (after more() returned true).
  Tree top() {
    if (text_[pos_] == ')') fail("{}: unbalanced brackets: ')' closes nothing", where(pos_));
    if (text_[pos_] != '(') {
      const size_t at = pos_;
      fail("{}: stray text '{}' outside a tree", where(at), excerpt(token()));
    }
    return node(1);
  }

 private:
  std::string_view token() {
    const size_t start = pos_;
    while (pos_ < text_.size() && !is_terminator(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  static std::string excerpt(std::string_view text) {
    return one_line(text.size() > 30 ? std::string(text.substr(0, 30)) + "..." : std::string(text));
  }
  [[noreturn]] void unclosed(size_t open) const {
    fail("{}: unbalanced brackets: this '(' is never closed", where(open));
  }

  // The constituent whose '(' is at the current position, `depth` levels down (the root is 1).
  Tree node(int64_t depth) {
    const size_t open = pos_++;
    const bool root = depth == 1;
    if (depth > kMaxTreeDepth)
      fail("{}: brackets nested more than {} levels deep (too deep for a parse tree)", where(open),
           kMaxTreeDepth);
    const std::string label(token());
    if (!more()) unclosed(open);
    if (text_[pos_] == ')') {
      ++pos_;
      if (root && label.empty()) return Tree{};  // "()": the empty tree
      fail("{}: constituent ({}) has no children", where(open), excerpt(label));
    }
    if (label.empty() && (!root || text_[pos_] != '('))
      fail("{}: empty label (only the outer root may be unlabeled)", where(open));
    if (text_[pos_] != '(') {
      std::string word(token());
      if (!more()) unclosed(open);
      if (text_[pos_] != ')') {
        const size_t at = pos_;
        const std::string_view stray = text_[at] == '(' ? std::string_view("(") : token();
        fail("{}: stray text '{}' after the word '{}' of ({} ...): a preterminal holds one word",
             where(at), excerpt(stray), excerpt(word), excerpt(label));
      }
      ++pos_;
      return Tree::node(label, {Tree::leaf(std::move(word))});
    }
    std::vector<Tree> children;
    while (true) {
      if (!more()) unclosed(open);
      if (text_[pos_] == ')') {
        ++pos_;
        break;
      }
      if (text_[pos_] != '(') {
        const size_t at = pos_;
        fail("{}: stray text '{}' among the constituents of ({} ...)", where(at), excerpt(token()),
             excerpt(label));
      }
      children.push_back(node(depth + 1));
    }
    return Tree::node(label, std::move(children));
  }

  std::string_view text_;
  std::string_view name_;
  int64_t first_line_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
};

void append(const Tree& tree, std::string& out) {
  if (tree.is_leaf()) {
    out += tree.word;
    return;
  }
  out += '(';
  out += tree.label;
  for (const Tree& child : tree.children) {
    out += ' ';
    append(child, out);
  }
  out += ')';
}

void collect(const Tree& tree, std::vector<std::string>& words, std::vector<std::string>& tags) {
  if (tree.is_leaf()) {
    words.push_back(tree.word);
    return;
  }
  if (tree.is_preterminal()) tags.push_back(tree.label);
  for (const Tree& child : tree.children) collect(child, words, tags);
}

std::optional<Tree> normalised(const Tree& tree) {
  if (tree.is_leaf()) return tree;
  if (tree.is_preterminal() && tree.label == "-NONE-") return std::nullopt;
  std::vector<Tree> children;
  for (const Tree& child : tree.children)
    if (std::optional<Tree> kept = normalised(child)) children.push_back(std::move(*kept));
  if (children.empty()) return std::nullopt;
  return Tree::node(strip_function_tags(tree.label), std::move(children));
}

}  // namespace

Tree parse_tree(std::string_view text, std::string_view name, int64_t first_line) {
  TreeParser parser(text, name, first_line);
  if (!parser.more()) fail("{}:{}:1: no tree (the text is empty)", name, first_line);
  Tree tree = parser.top();
  if (parser.more())
    fail("{}: stray text after the tree (one tree expected)", parser.where(parser.pos()));
  return tree;
}

std::vector<Tree> parse_trees(const std::vector<std::string>& lines, std::string_view name) {
  std::string text;
  for (const std::string& line : lines) {
    text += line;
    text += '\n';
  }
  TreeParser parser(text, name, 1);
  struct Read {
    Tree tree;
    int64_t first, last;  // 0-based lines
  };
  std::vector<Read> read;
  bool multi_line = false;
  while (parser.more()) {
    const int64_t first = parser.line_of(parser.pos());
    Tree tree = parser.top();
    const int64_t last = parser.line_of(parser.pos() - 1);
    multi_line = multi_line || first != last;
    read.push_back({std::move(tree), first, last});
  }
  std::vector<Tree> trees;
  if (multi_line) {
    for (Read& r : read) trees.push_back(std::move(r.tree));
    return trees;
  }
  // One tree a line: an empty line is the empty tree.
  trees.resize(lines.size());
  std::vector<bool> seen(lines.size(), false);
  for (Read& r : read) {
    const auto line = static_cast<size_t>(r.first);
    TFM_CHECK(!seen[line], "{}:{}: a second tree on the line (one tree a line, or PTB .mrg text)",
              name, line + 1);
    seen[line] = true;
    trees[line] = std::move(r.tree);
  }
  return trees;
}

std::vector<Tree> read_tree_file(const std::filesystem::path& path) {
  return parse_trees(read_text_lines(path), path.string());
}

std::string to_string(const Tree& tree) {
  if (tree.empty()) return "()";
  std::string out;
  append(tree, out);
  return out;
}

std::vector<std::string> tree_words(const Tree& tree) {
  std::vector<std::string> words, tags;
  collect(tree, words, tags);
  return words;
}

std::vector<std::string> tree_tags(const Tree& tree) {
  std::vector<std::string> words, tags;
  collect(tree, words, tags);
  return tags;
}

std::string strip_function_tags(std::string_view label) {
  if (label.empty() || label[0] == '-') return std::string(label);
  // A label that starts with '=' would be left empty, which no tree below the root may hold.
  const size_t end = label.find_first_of("-=");
  return std::string(label.substr(0, end == 0 ? label.size() : end));
}

Tree normalise(const Tree& tree) {
  if (tree.empty()) return Tree{};
  if (tree.label.empty() || tree.label == "TOP") {
    std::vector<Tree> children;
    for (const Tree& child : tree.children)
      if (std::optional<Tree> kept = normalised(child)) children.push_back(std::move(*kept));
    if (children.empty()) return Tree{};
    return Tree::node("TOP", std::move(children));
  }
  std::optional<Tree> kept = normalised(tree);
  if (!kept) return Tree{};
  return Tree::node("TOP", {std::move(*kept)});
}

}  // namespace tfm::internal::data
