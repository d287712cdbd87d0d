#include "tfm/tasks/tree_constraint.h"

#include <algorithm>
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
  TreeState(std::shared_ptr<const TreeTokens> tokens, std::shared_ptr<const Leaves> leaves,
            int64_t max_length, bool pooled)
      : tokens_(std::move(tokens)),
        leaves_(std::move(leaves)),
        max_length_(max_length),
        pooled_(pooled) {
    for (const std::vector<int32_t>& leaf : *leaves_)
      pieces_left_ += static_cast<int64_t>(leaf.size());
  }

  std::unique_ptr<decode::ConstraintState> clone() const override {
    return std::make_unique<TreeState>(*this);
  }

  void allowed(std::vector<int32_t>& out) const override {
    // Inside a word: only its next piece (the bound below held when the word began).
    if (piece_ > 0) {
      out.push_back(leaf()[piece_]);
      return;
    }
    const auto open = static_cast<int64_t>(open_.size());
    // Tokens still needed after this state at the least: its leaf pieces, its closes and eos.
    const int64_t needed = length_ + pieces_left_ + open + 1;
    const bool words_left = word_ < leaves_->size();
    if (words_left && needed <= max_length_) out.push_back(leaf()[0]);
    // An open adds itself and its close; TOP and a preterminal count towards the depth.
    if (words_left && needed + 2 <= max_length_ && open + 3 <= data::kMaxTreeDepth)
      out.insert(out.end(), tokens_->opens.begin(), tokens_->opens.end());
    if (open > 0 && open_.back().has_child)
      out.push_back(tokens_->closes[static_cast<size_t>(open_.back().label)]);
  }

  bool may_end() const override { return word_ == leaves_->size() && open_.empty(); }

  // Lexicalised: the next word's first piece stands for every leaf start, its other pieces are
  // certain (TreeConstraint's constructor says why).
  Pooled pooled() const override {
    if (!pooled_ || word_ == leaves_->size()) return {};
    if (piece_ > 0) return {leaf()[piece_], nullptr};
    return {leaf()[0], &tokens_->leaf_starts};
  }

  void advance(int32_t token) override {
    const auto id = static_cast<size_t>(token);
    const bool known = token >= 0 && id < tokens_->label_of_open.size();
    const bool words_left = word_ < leaves_->size();
    if (words_left && token == leaf()[piece_]) {
      --pieces_left_;
      if (++piece_ == leaf().size()) {
        ++word_;
        piece_ = 0;
        mark_child();
      }
    } else if (piece_ > 0) {
      fail("tree constraint: token {} inside word {} after {} tokens", token, word_, length_);
    } else if (known && tokens_->label_of_open[id] >= 0 && words_left) {
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
  const std::vector<int32_t>& leaf() const { return (*leaves_)[word_]; }
  void mark_child() {
    if (!open_.empty()) open_.back().has_child = true;
  }

  std::shared_ptr<const TreeTokens> tokens_;
  std::shared_ptr<const Leaves> leaves_;
  std::vector<Open> open_;
  size_t word_ = 0;          // the word being written or next
  size_t piece_ = 0;         // its pieces written
  int64_t pieces_left_ = 0;  // of all words left, this one's unwritten included
  int64_t max_length_;
  int64_t length_ = 0;
  bool pooled_;
};

}  // namespace

TreeTokens TreeTokens::from_pieces(const std::vector<std::string>& pieces, const std::string& name,
                                   data::TreeLeaves leaves) {
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
    const std::string_view open = bracket_label(piece, '('), close = bracket_label(piece, ')');
    if (!open.empty()) brackets.try_emplace(open, -1, -1).first->second.first = token;
    if (!close.empty()) brackets.try_emplace(close, -1, -1).first->second.second = token;
    if (open.empty() && close.empty()) t.leaf_starts.push_back(token);
  }
  if (data::kUnkId < static_cast<int32_t>(pieces.size())) t.leaf_starts.push_back(data::kUnkId);
  TFM_CHECK(t.placeholder >= 0 || leaves == data::TreeLeaves::words,
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

TreeTokens TreeTokens::from_vocabulary(const data::Vocabulary& vocab, data::TreeLeaves leaves) {
  std::vector<std::string> pieces;
  for (int64_t id = 0; id < vocab.size(); ++id)
    pieces.push_back(vocab.piece(static_cast<int32_t>(id)));
  return from_pieces(pieces, vocab.path().string(), leaves);
}

Leaves leaf_pieces(const data::Vocabulary& vocab, const std::vector<std::string>& words) {
  Leaves leaves;
  for (const std::string& word : words) {
    leaves.push_back(vocab.encode_target(word));
    if (leaves.back().empty()) leaves.back().push_back(data::kUnkId);
  }
  return leaves;
}

TreeConstraint::TreeConstraint(std::shared_ptr<const TreeTokens> tokens,
                               std::vector<int64_t> word_counts)
    : tokens_(std::move(tokens)) {
  TFM_CHECK(tokens_ != nullptr && tokens_->placeholder >= 0, "tree constraint: no XX token");
  for (int64_t words : word_counts)
    leaves_.push_back(
        std::make_shared<const Leaves>(static_cast<size_t>(std::max<int64_t>(words, 0)),
                                       std::vector<int32_t>{tokens_->placeholder}));
}

TreeConstraint::TreeConstraint(std::shared_ptr<const TreeTokens> tokens, const WordLeaves& leaves)
    : tokens_(std::move(tokens)) {
  TFM_CHECK(tokens_ != nullptr, "tree constraint: no tokens");
  for (size_t s = 0; s < leaves.sources.size(); ++s) {
    for (const std::vector<int32_t>& leaf : leaves.sources[s])
      TFM_CHECK(!leaf.empty(), "tree constraint: source {} has a word without pieces", s);
    leaves_.push_back(std::make_shared<const Leaves>(leaves.sources[s]));
  }
  pooled_ = true;
}

std::unique_ptr<decode::ConstraintState> TreeConstraint::start(int64_t source,
                                                               int64_t max_length) const {
  TFM_CHECK(source >= 0 && source < static_cast<int64_t>(leaves_.size()),
            "tree constraint: source {} of {}", source, leaves_.size());
  return std::make_unique<TreeState>(tokens_, leaves_[static_cast<size_t>(source)], max_length,
                                     pooled_);
}

}  // namespace tfm::internal::tasks
