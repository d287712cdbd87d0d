#include "tfm/data/tree_sequences.h"

#include <algorithm>
#include <iterator>
#include <regex>
#include <utility>

#include "tfm/core/error.h"

namespace tfm::internal::data {

namespace {

constexpr std::string_view kRootLabel = "TOP";

bool is_root_label(std::string_view label) {
  return label.empty() || label == kRootLabel;
}

void append_token(std::string& out, std::string_view token) {
  if (!out.empty()) out += ' ';
  out += token;
}

void linearise_node(const Tree& node, TreeLeaves leaves, std::string& out) {
  if (node.is_preterminal() || node.is_leaf()) {
    if (leaves == TreeLeaves::placeholder)
      append_token(out, kPreterminalPlaceholder);
    else
      append_token(out, escape_word(node.is_leaf() ? node.word : node.children[0].word));
    return;
  }
  append_token(out, "(" + node.label);
  for (const Tree& child : node.children) linearise_node(child, leaves, out);
  append_token(out, ")" + node.label);
}

std::vector<std::string_view> split_tokens(std::string_view text) {
  std::vector<std::string_view> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

bool is_open(std::string_view token) {
  return token.size() > 1 && token[0] == '(' && token.find_first_of("()") == 0 &&
         token.find_first_of("()", 1) == std::string_view::npos;
}
bool is_close(std::string_view token) {
  return token.size() > 1 && token[0] == ')' &&
         token.find_first_of("()", 1) == std::string_view::npos;
}

// Builds the tree while walking a sequence: the open constituents on a stack, the finished
// top-level nodes below the root.
class TreeBuilder {
 public:
  TreeBuilder(const std::vector<std::string>& words, const std::vector<std::string>& tags)
      : words_(words), tags_(tags) {}

  bool words_left() const { return next_word_ < words_.size(); }
  bool any_open() const { return !open_.empty(); }
  const std::string& innermost_label() const { return open_.back().label; }

  // Opens a constituent; false (nothing opened) when the tree would grow deeper than
  // kMaxTreeDepth, counting the TOP root above and a preterminal below.
  bool open(std::string_view label) {
    if (static_cast<int64_t>(open_.size()) + 2 >= kMaxTreeDepth) return false;
    open_.push_back(Tree::node(std::string(label), {}));
    return true;
  }

  void add_word() {
    const std::string& word = words_[next_word_];
    std::string tag = next_word_ < tags_.size() && !tags_[next_word_].empty() ? tags_[next_word_]
                                                                              : guess_tag(word);
    ++next_word_;
    attach(Tree::node(std::move(tag), {Tree::leaf(word)}));
  }

  // Closes the innermost constituent; false (and the constituent dropped) when it has no children.
  bool close() {
    Tree node = std::move(open_.back());
    open_.pop_back();
    if (node.children.empty()) return false;
    attach(std::move(node));
    return true;
  }

  // The depth (from the innermost, 0) of the innermost open constituent labelled `label`, or -1.
  int64_t depth_of(std::string_view label) const {
    for (size_t i = open_.size(); i-- > 0;)
      if (open_[i].label == label) return static_cast<int64_t>(open_.size() - 1 - i);
    return -1;
  }

  Tree finish() { return Tree::node(std::string(kRootLabel), std::move(top_)); }

 private:
  void attach(Tree node) {
    (open_.empty() ? top_ : open_.back().children).push_back(std::move(node));
  }

  const std::vector<std::string>& words_;
  const std::vector<std::string>& tags_;
  size_t next_word_ = 0;
  std::vector<Tree> open_;
  std::vector<Tree> top_;
};

}  // namespace

TreeLeaves tree_leaves_named(std::string_view name) {
  if (name == "xx") return TreeLeaves::placeholder;
  if (name == "words") return TreeLeaves::words;
  fail("tree leaves must be \"xx\" or \"words\", got \"{}\"", name);
}

std::string linearise(const Tree& tree, TreeLeaves leaves) {
  std::string out;
  if (tree.empty()) return out;
  if (is_root_label(tree.label) && !tree.is_preterminal()) {
    for (const Tree& child : tree.children) linearise_node(child, leaves, out);
  } else {
    linearise_node(tree, leaves, out);
  }
  return out;
}

std::string placeholder_leaves(std::string_view sequence) {
  std::string out;
  for (std::string_view token : split_tokens(sequence)) {
    const bool bracket = token.size() > 1 && (token[0] == '(' || token[0] == ')');
    append_token(out, bracket ? token : kPreterminalPlaceholder);
  }
  return out;
}

std::optional<Tree> delinearise(std::string_view sequence, const std::vector<std::string>& words,
                                const std::vector<std::string>& tags) {
  TreeBuilder builder(words, tags);
  for (std::string_view token : split_tokens(sequence)) {
    if (token == kPreterminalPlaceholder) {
      if (!builder.words_left()) return std::nullopt;
      builder.add_word();
    } else if (is_open(token)) {
      if (!builder.open(token.substr(1))) return std::nullopt;
    } else if (is_close(token)) {
      if (!builder.any_open() || builder.innermost_label() != token.substr(1)) return std::nullopt;
      if (!builder.close()) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (builder.any_open() || builder.words_left()) return std::nullopt;
  return builder.finish();
}

Repaired repair(std::string_view sequence, const std::vector<std::string>& words,
                const std::vector<std::string>& tags) {
  TreeBuilder builder(words, tags);
  int64_t edits = 0;
  for (std::string_view token : split_tokens(sequence)) {
    if (token == kPreterminalPlaceholder) {
      if (builder.words_left())
        builder.add_word();
      else
        ++edits;  // one XX too many
    } else if (is_open(token)) {
      if (!builder.open(token.substr(1))) ++edits;  // too deep: dropped
    } else if (is_close(token)) {
      const int64_t depth = builder.depth_of(token.substr(1));
      if (depth < 0) {
        ++edits;  // closes nothing open
        continue;
      }
      edits += depth;  // the constituents inside it close first
      for (int64_t i = 0; i <= depth; ++i)
        if (!builder.close()) ++edits;  // an empty constituent, removed
    } else {
      ++edits;  // not a token of the scheme
    }
  }
  while (builder.words_left()) {
    builder.add_word();
    ++edits;
  }
  while (builder.any_open()) {
    builder.close();  // one opened after the last word is empty and dropped
    ++edits;
  }
  return {builder.finish(), edits};
}

std::string guess_tag(std::string_view word) {
  static const std::pair<std::string_view, std::string_view> kPunctuation[] = {
      {",", ","},         {".", "."},         {"?", "."},         {"!", "."},
      {":", ":"},         {";", ":"},         {"--", ":"},        {"...", ":"},
      {"-", ":"},         {"``", "``"},       {"`", "``"},        {"''", "''"},
      {"-LRB-", "-LRB-"}, {"-LCB-", "-LRB-"}, {"-LSB-", "-LRB-"}, {"-RRB-", "-RRB-"},
      {"-RCB-", "-RRB-"}, {"-RSB-", "-RRB-"}, {"#", "#"},         {"$", "$"}};
  for (const auto& [token, tag] : kPunctuation)
    if (word == token) return std::string(tag);
  return std::string(kUnknownTag);
}

std::string escape_word(std::string_view word) {
  static const std::pair<char, std::string_view> kBrackets[] = {{'(', "-LRB-"}, {')', "-RRB-"},
                                                                {'{', "-LCB-"}, {'}', "-RCB-"},
                                                                {'[', "-LSB-"}, {']', "-RSB-"}};
  std::string out;
  for (char c : word) {
    const auto* bracket = std::find_if(std::begin(kBrackets), std::end(kBrackets),
                                       [c](const auto& entry) { return entry.first == c; });
    if (bracket == std::end(kBrackets))
      out += c;
    else
      out += bracket->second;
  }
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  for (std::string_view token : split_tokens(text)) words.push_back(escape_word(token));
  return words;
}

std::vector<std::string> ptb_tokenize(std::string_view text) {
  // The substitutions of tokenizer.sed (Robert MacIntyre, 1995), in its order.
  static const std::vector<std::pair<std::regex, std::string>> kRules = [] {
    const std::pair<const char*, const char*> rules[] = {
        {"^\"", "`` "},
        {"([ (\\[{<])\"", "$1 `` "},
        {"\\.\\.\\.", " ... "},
        {"([,;:@#$%&])", " $1 "},
        {"([^.])([.])([\\])}>\"']*)[ \t]*$", "$1 $2$3 "},
        {"([?!])", " $1 "},
        {"([\\]\\[(){}<>])", " $1 "},
        {"--", " -- "},
        {"$", " "},
        {"^", " "},
        {"\"", " '' "},
        {"([^'])' ", "$1 ' "},
        {"'([sSmMdD]) ", " '$1 "},
        {"'(ll|re|ve|LL|RE|VE) ", " '$1 "},
        {"(n't|N'T) ", " $1 "},
        {" ([Cc])annot ", " $1an not "},
        {" ([Dd])'ye ", " $1' ye "},
        {" ([Gg])imme ", " $1im me "},
        {" ([Gg])onna ", " $1on na "},
        {" ([Gg])otta ", " $1ot ta "},
        {" ([Ll])emme ", " $1em me "},
        {" ([Mm])ore'n ", " $1ore 'n "},
        {" '([Tt])is ", " '$1 is "},
        {" '([Tt])was ", " '$1 was "},
        {" ([Ww])anna ", " $1an na "},
    };
    std::vector<std::pair<std::regex, std::string>> compiled;
    for (const auto& [pattern, replacement] : rules)
      compiled.emplace_back(std::regex(pattern), replacement);
    return compiled;
  }();
  std::string line(text);
  for (const auto& [pattern, replacement] : kRules)
    line = std::regex_replace(line, pattern, replacement);
  return split_words(line);
}

}  // namespace tfm::internal::data
