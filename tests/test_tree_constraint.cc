// The parser's tree constraint (tasks/tree_constraint.h): by hand, what it allows at chosen
// points; against brute force, that it allows exactly the continuations of the sequences
// data::delinearise accepts within the maximum length; over a random walk of 10,000 steps, that
// it never writes a non-tree and can always end in time; and beam search under it on a random
// model returns only trees.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_decode_helpers.h"
#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/decode/translate.h"
#include "tfm/tasks/tree_constraint.h"

namespace tfm::internal::tasks {
namespace {

constexpr int32_t kEos = 3;

// Pieces as a word vocabulary spells them: the specials, XX, S and NP with both brackets, VP with
// an open bracket only (never allowed: it could not be closed), a word, and "(NP" without the word
// boundary (the middle of a word: not a token of the tree).
const std::vector<std::string> kPieces = {"<pad>",     "<unk>",     "<s>",       "</s>",
                                          "\u2581XX",  "\u2581(S",  "\u2581)S",  "\u2581(NP",
                                          "\u2581)NP", "\u2581(VP", "\u2581cat", "(NP"};
enum : int32_t { XX = 4, OpenS = 5, CloseS = 6, OpenNP = 7, CloseNP = 8 };

std::shared_ptr<const TreeTokens> tokens() {
  return std::make_shared<TreeTokens>(TreeTokens::from_pieces(kPieces, "test.model"));
}

std::string text_of(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    if (!out.empty()) out += ' ';
    out += kPieces[static_cast<size_t>(id)].substr(3);  // without "▁"
  }
  return out;
}

bool is_tree(const std::vector<int32_t>& ids, int64_t words) {
  return data::delinearise(text_of(ids), std::vector<std::string>(static_cast<size_t>(words), "w"))
      .has_value();
}

// The tokens a state allows next, eos included when it may end, sorted.
std::vector<int32_t> next_of(const decode::ConstraintState& state) {
  std::vector<int32_t> out;
  state.allowed(out);
  if (state.may_end()) out.push_back(kEos);
  std::sort(out.begin(), out.end());
  return out;
}

std::unique_ptr<decode::ConstraintState> after(const TreeConstraint& c, int64_t source,
                                               int64_t max_length,
                                               const std::vector<int32_t>& prefix) {
  auto state = c.start(source, max_length);
  for (int32_t t : prefix) state->advance(t);
  return state;
}

using V = std::vector<int32_t>;

TEST(TreeConstraint, AllowsByHand) {
  const TreeConstraint c(tokens(), {2, 1, 0});
  // Two words, room enough: a word or a constituent; never a close, eos, VP, "cat" or "(NP".
  EXPECT_EQ(next_of(*after(c, 0, 20, {})), (V{XX, OpenS, OpenNP}));
  // Inside a constituent without a child: no close yet.
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenS})), (V{XX, OpenS, OpenNP}));
  // With a child: its own close only (not NP's).
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenS, XX})), (V{XX, OpenS, CloseS, OpenNP}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenS, OpenNP, XX})), (V{XX, OpenS, OpenNP, CloseNP}));
  // Every word placed: only closes, then eos once all are closed.
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenS, XX, OpenNP, XX})), (V{CloseNP}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenS, XX, OpenNP, XX, CloseNP})), (V{CloseS}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenS, XX, OpenNP, XX, CloseNP, CloseS})), (V{kEos}));
  // The top level may hold words and several constituents (TOP is not written).
  EXPECT_EQ(next_of(*after(c, 0, 20, {XX, XX})), (V{kEos}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {OpenNP, XX, CloseNP})), (V{XX, OpenS, OpenNP}));
  // The length bound: 2 words need 3 tokens (XX XX eos); a bracket pair needs 2 more.
  EXPECT_EQ(next_of(*after(c, 0, 3, {})), (V{XX}));
  EXPECT_EQ(next_of(*after(c, 0, 4, {})), (V{XX}));
  EXPECT_EQ(next_of(*after(c, 0, 5, {})), (V{XX, OpenS, OpenNP}));
  EXPECT_EQ(next_of(*after(c, 0, 6, {OpenS, XX})), (V{XX, CloseS}));
  EXPECT_EQ(next_of(*after(c, 0, 2, {})), V{}) << "no tree of 2 words fits 2 tokens";
  // One word; no words (nothing to place: only eos).
  EXPECT_EQ(next_of(*after(c, 1, 20, {XX})), (V{kEos}));
  EXPECT_EQ(next_of(*after(c, 2, 20, {})), (V{kEos}));
  // A token it does not allow is an error, not a silent state.
  EXPECT_THROW(after(c, 0, 20, {CloseS}), Error);
  EXPECT_THROW(after(c, 0, 20, {OpenS, CloseS}), Error);
  EXPECT_THROW(after(c, 1, 20, {XX, XX}), Error);
  EXPECT_THROW(c.start(3, 20), Error);
}

TEST(TreeConstraint, AVocabularyWithoutThePlaceholderIsAnError) {
  try {
    TreeTokens::from_pieces({"<pad>", "<unk>", "<s>", "</s>", "\u2581(S", "\u2581)S", "XX"},
                            "words.model");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("words.model: the vocabulary has no piece XX"),
              std::string::npos)
        << e.what();
  }
}

// Every sequence over the scheme's tokens (and one that is not: "cat") of at most max_length - 1
// tokens, the trees among them found by data::delinearise; then, over every prefix of a tree, the
// constraint must allow exactly the tokens that continue it towards a tree (eos: it is one), and
// nothing from any other prefix is ever reachable.
TEST(TreeConstraint, AllowsExactlyTheContinuationsOfTreesWithinTheBound) {
  const std::vector<int32_t> alphabet{XX, OpenS, CloseS, OpenNP, CloseNP, 10};
  for (int64_t words : {1, 2, 3}) {
    for (int64_t max_length : {3, 5, 7}) {
      std::set<std::vector<int32_t>> trees, prefixes;
      std::vector<int32_t> sequence;
      std::function<void()> enumerate = [&] {
        if (is_tree(sequence, words)) {
          trees.insert(sequence);
          for (size_t n = 0; n <= sequence.size(); ++n)
            prefixes.insert(std::vector<int32_t>(sequence.begin(), sequence.begin() + n));
        }
        if (static_cast<int64_t>(sequence.size()) + 1 >= max_length) return;  // + eos
        for (int32_t t : alphabet) {
          sequence.push_back(t);
          enumerate();
          sequence.pop_back();
        }
      };
      enumerate();
      const TreeConstraint c(tokens(), {words});
      for (const std::vector<int32_t>& prefix : prefixes) {
        V want;
        for (int32_t t : alphabet) {
          std::vector<int32_t> longer = prefix;
          longer.push_back(t);
          if (prefixes.count(longer)) want.push_back(t);
        }
        if (trees.count(prefix)) want.push_back(kEos);
        std::sort(want.begin(), want.end());
        EXPECT_EQ(next_of(*after(c, 0, max_length, prefix)), want)
            << words << " words, max length " << max_length << ", after '" << text_of(prefix)
            << "'";
      }
      // The shortest tree of w words is w XXs, then eos.
      EXPECT_EQ(trees.empty(), words + 1 > max_length) << words << " words, " << max_length;
    }
  }
}

// 10,000 steps of a walk that picks uniformly among the allowed tokens (eos included), over
// sentences of random lengths and bounds: every state allows something, every walk ends by eos
// within its bound, and every sequence it ends is a tree over exactly its words.
TEST(TreeConstraint, ARandomWalkOnlyWritesTreesAndAlwaysEndsInTime) {
  const TreeConstraint c(tokens(), {1, 2, 3, 5, 8, 13, 21, 40});
  std::mt19937_64 rng(46);
  int64_t steps = 0, sentences = 0;
  while (steps < 10000) {
    const auto source = static_cast<int64_t>(rng() % 8);
    const int64_t words = std::vector<int64_t>{1, 2, 3, 5, 8, 13, 21, 40}[source];
    const int64_t max_length = words + 1 + static_cast<int64_t>(rng() % 60);
    auto state = c.start(source, max_length);
    std::vector<int32_t> sequence;
    for (;;) {
      const V next = next_of(*state);
      ASSERT_FALSE(next.empty()) << "stuck after '" << text_of(sequence) << "'";
      const int32_t token = next[rng() % next.size()];
      ++steps;
      ASSERT_LE(static_cast<int64_t>(sequence.size()) + 1, max_length);
      if (token == kEos) break;
      sequence.push_back(token);
      state->advance(token);
    }
    ASSERT_TRUE(is_tree(sequence, words)) << text_of(sequence);
    ++sentences;
  }
  EXPECT_GT(sentences, 50);
}

// A tiny random Transformer whose vocabulary is kPieces' ids and some more: beam and greedy
// search under the constraint return n-best lists of trees over each source's words only.
TEST(TreeConstraint, BeamSearchUnderItReturnsOnlyTrees) {
  ModelConfig config = testing::tiny_decoder_config();
  config.vocab_size = 16;
  nn::Transformer model(config);
  model.init(7);
  std::vector<std::string> pieces = kPieces;
  while (pieces.size() < 16) pieces.push_back("\u2581w" + std::to_string(pieces.size()));
  const std::vector<int64_t> words{1, 4, 2, 7, 3};
  const auto sources =
      testing::random_sources({1, 4, 2, 7, 3}, static_cast<int32_t>(config.vocab_size), 5);
  for (int64_t beam : {1, 5}) {
    decode::TranslateOptions options;
    options.beam_size = beam;
    options.n_best = beam;
    options.alpha = 0.3;
    options.max_length_offset = 6;
    options.batch_size = 2;
    options.constraint = std::make_shared<TreeConstraint>(
        std::make_shared<TreeTokens>(TreeTokens::from_pieces(pieces, "test")), words);
    const auto found = decode::translate(model, sources, options);
    for (size_t s = 0; s < sources.size(); ++s) {
      ASSERT_EQ(found[s].size(), static_cast<size_t>(beam)) << "sentence " << s;
      for (const decode::Hypothesis& h : found[s]) {
        EXPECT_TRUE(h.ended_by_eos);
        EXPECT_TRUE(is_tree(h.tokens, words[s])) << "sentence " << s << ": " << text_of(h.tokens);
      }
    }
  }
}

}  // namespace
}  // namespace tfm::internal::tasks
