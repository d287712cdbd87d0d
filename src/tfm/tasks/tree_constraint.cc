#include "tfm/tasks/tree_constraint.h"

#include <map>
#include <string_view>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"

namespace tfm::internal::tasks {

namespace {

constexpr std::string_view kWordBoundary = "\xE2\x96\x81";  // "▁", U+2581

// A bracket token's label: "(NP" or ")NP" gives "NP" when `bracket` starts it and no other
// bracket is in it (data::delinearise's reading), else empty.
std::string_view bracket_label(std::string_view token, char bracket) {
  if (token.size() < 2 || token[0] != bracket) return {};
  const std::string_view label = token.substr(1);
  return label.find_first_of("()") == std::string_view::npos ? label : std::string_view{};
}

class TreeState final : public decode::ConstraintState {
 public:
  TreeState(std::shared_ptr<const TreeTokens> tokens, int64_t words, int64_t max_length)
      : tokens_(std::move(tokens)), words_left_(words), max_length_(max_length) {}

  std::unique_ptr<decode::ConstraintState> clone() const override {
    return std::make_unique<TreeState>(*this);
  }

  void allowed(std::vector<int32_t>& out) const override {
    const auto open = static_cast<int64_t>(open_.size());
    // Tokens still needed after this state at the least: its XXs, its closes and eos.
    const int64_t needed = length_ + words_left_ + open + 1;
    if (words_left_ > 0 && needed <= max_length_) out.push_back(tokens_->placeholder);
    // An open adds itself and its close; TOP and a preterminal count towards the depth.
    if (words_left_ > 0 && needed + 2 <= max_length_ && open + 3 <= data::kMaxTreeDepth)
      out.insert(out.end(), tokens_->opens.begin(), tokens_->opens.end());
    if (open > 0 && open_.back().has_child)
      out.push_back(tokens_->closes[static_cast<size_t>(open_.back().label)]);
  }

  bool may_end() const override { return words_left_ == 0 && open_.empty(); }

  void advance(int32_t token) override {
    const auto id = static_cast<size_t>(token);
    const bool known = token >= 0 && id < tokens_->label_of_open.size();
    if (token == tokens_->placeholder && words_left_ > 0) {
      --words_left_;
      mark_child();
    } else if (known && tokens_->label_of_open[id] >= 0 && words_left_ > 0) {
      open_.push_back({tokens_->label_of_open[id], false});
    } else if (known && !open_.empty() && open_.back().has_child &&
               tokens_->label_of_close[id] == open_.back().label) {
      open_.pop_back();
      mark_child();
    } else {
      fail("tree constraint: token {} is not allowed after {} tokens", token, length_);
    }
    ++length_;
  }

 private:
  struct Open {
    int32_t label;
    bool has_child;
  };
  void mark_child() {
    if (!open_.empty()) open_.back().has_child = true;
  }

  std::shared_ptr<const TreeTokens> tokens_;
  std::vector<Open> open_;
  int64_t words_left_;
  int64_t max_length_;
  int64_t length_ = 0;
};

}  // namespace

TreeTokens TreeTokens::from_pieces(const std::vector<std::string>& pieces,
                                   const std::string& name) {
  TreeTokens t;
  t.label_of_open.assign(pieces.size(), -1);
  t.label_of_close.assign(pieces.size(), -1);
  std::map<std::string_view, std::pair<int32_t, int32_t>> brackets;  // label: (open, close) ids
  for (size_t id = 0; id < pieces.size(); ++id) {
    std::string_view piece = pieces[id];
    if (!piece.starts_with(kWordBoundary)) continue;
    piece.remove_prefix(kWordBoundary.size());
    const auto token = static_cast<int32_t>(id);
    if (piece == data::kPreterminalPlaceholder) t.placeholder = token;
    if (const std::string_view label = bracket_label(piece, '('); !label.empty())
      brackets.try_emplace(label, -1, -1).first->second.first = token;
    if (const std::string_view label = bracket_label(piece, ')'); !label.empty())
      brackets.try_emplace(label, -1, -1).first->second.second = token;
  }
  TFM_CHECK(t.placeholder >= 0,
            "{}: the vocabulary has no piece {} (a parser's vocabulary holds the tree tokens as "
            "whole words): the tree constraint cannot place a word",
            name, data::kPreterminalPlaceholder);
  // A label whose open or close is missing could never be closed (or opened): left out.
  for (const auto& [label, ids] : brackets) {
    if (ids.first < 0 || ids.second < 0) continue;
    const auto index = static_cast<int32_t>(t.opens.size());
    t.opens.push_back(ids.first);
    t.closes.push_back(ids.second);
    t.label_of_open[static_cast<size_t>(ids.first)] = index;
    t.label_of_close[static_cast<size_t>(ids.second)] = index;
  }
  return t;
}

TreeTokens TreeTokens::from_vocabulary(const data::Vocabulary& vocab) {
  std::vector<std::string> pieces;
  for (int64_t id = 0; id < vocab.size(); ++id)
    pieces.push_back(vocab.piece(static_cast<int32_t>(id)));
  return from_pieces(pieces, vocab.path().string());
}

TreeConstraint::TreeConstraint(std::shared_ptr<const TreeTokens> tokens,
                               std::vector<int64_t> word_counts)
    : tokens_(std::move(tokens)), word_counts_(std::move(word_counts)) {
  TFM_CHECK(tokens_ != nullptr, "tree constraint: no tokens");
}

std::unique_ptr<decode::ConstraintState> TreeConstraint::start(int64_t source,
                                                               int64_t max_length) const {
  TFM_CHECK(source >= 0 && source < static_cast<int64_t>(word_counts_.size()),
            "tree constraint: source {} of {}", source, word_counts_.size());
  return std::make_unique<TreeState>(tokens_, word_counts_[static_cast<size_t>(source)],
                                     max_length);
}

}  // namespace tfm::internal::tasks
