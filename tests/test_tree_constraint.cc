// The parser's tree constraint (tasks/tree_constraint.h): by hand, what it allows at chosen
// points; against brute force, that it allows exactly the continuations of the sequences
// data::delinearise accepts within the maximum length; over a random walk of 10,000 steps, that
// it never writes a non-tree and can always end in time; and beam search under it on a random
// model returns only trees. The same for the lexicalised scheme (words, of one or more pieces, in
// place of XX), and its pieces against a trained SentencePiece vocabulary.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "test_decode_helpers.h"
#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/tasks/parsing.h"
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

// One walk of `state` to its end, each token drawn uniformly among those it allows (eos included),
// `steps` counting them: the tokens before eos, or nullopt with a failure recorded when a state
// allows nothing or the walk outgrows `max_length`.
std::optional<V> random_walk(decode::ConstraintState& state, int64_t max_length,
                             std::mt19937_64& rng, int64_t& steps) {
  V sequence;
  for (;;) {
    const V next = next_of(state);
    if (next.empty()) {
      ADD_FAILURE() << "stuck after " << sequence.size() << " tokens";
      return std::nullopt;
    }
    const int32_t token = next[rng() % next.size()];
    ++steps;
    if (static_cast<int64_t>(sequence.size()) + 1 > max_length) {
      ADD_FAILURE() << "longer than the bound " << max_length;
      return std::nullopt;
    }
    if (token == kEos) return sequence;
    sequence.push_back(token);
    state.advance(token);
  }
}

// Beam (5-best) and greedy search, batched, on a tiny random Transformer whose vocabulary is
// `pieces` padded to 16, over random sources of `lengths` tokens, under `constraint`: every
// hypothesis ends by eos and `valid(source, tokens)` holds for it.
void expect_searches_return_only(const std::vector<std::string>& pieces,
                                 const std::vector<int>& lengths, int64_t max_length_offset,
                                 const std::shared_ptr<const decode::Constraint>& constraint,
                                 const std::function<bool(size_t, const V&)>& valid) {
  ModelConfig config = testing::tiny_decoder_config();
  config.vocab_size = 16;
  nn::Transformer model(config);
  model.init(7);
  const auto sources = testing::random_sources(lengths, static_cast<int32_t>(config.vocab_size), 5);
  for (int64_t beam : {1, 5}) {
    decode::TranslateOptions options;
    options.beam_size = beam;
    options.n_best = beam;
    options.alpha = 0.3;
    options.max_length_offset = max_length_offset;
    options.batch_size = 2;
    options.constraint = constraint;
    const auto found = decode::translate(model, sources, options);
    for (size_t s = 0; s < sources.size(); ++s) {
      ASSERT_EQ(found[s].size(), static_cast<size_t>(beam)) << "sentence " << s;
      for (const decode::Hypothesis& h : found[s]) {
        EXPECT_TRUE(h.ended_by_eos);
        EXPECT_TRUE(valid(s, h.tokens)) << "beam " << beam << ", sentence " << s;
      }
    }
  }
}

// kPieces (or another list) padded to the tiny model's 16 tokens with words.
std::vector<std::string> padded_to_16(std::vector<std::string> pieces) {
  while (pieces.size() < 16) pieces.push_back("\u2581w" + std::to_string(pieces.size()));
  return pieces;
}

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
    const std::optional<V> sequence = random_walk(*state, max_length, rng, steps);
    ASSERT_TRUE(sequence.has_value());
    ASSERT_TRUE(is_tree(*sequence, words)) << text_of(*sequence);
    ++sentences;
  }
  EXPECT_GT(sentences, 50);
}

// A tiny random Transformer whose vocabulary is kPieces' ids and some more: beam and greedy
// search under the constraint return n-best lists of trees over each source's words only.
TEST(TreeConstraint, BeamSearchUnderItReturnsOnlyTrees) {
  const std::vector<int64_t> words{1, 4, 2, 7, 3};
  const std::vector<std::string> pieces = padded_to_16(kPieces);
  expect_searches_return_only(
      pieces, {1, 4, 2, 7, 3}, 6,
      std::make_shared<TreeConstraint>(
          std::make_shared<TreeTokens>(TreeTokens::from_pieces(pieces, "test")), words),
      [&](size_t s, const V& tokens) { return is_tree(tokens, words[s]); });
}

// The lexicalised scheme (TreeLeaves::words): a vocabulary without XX, whose words are a piece
// each, or two ("▁s" "at"), and <unk> for a word it lacks.
const std::vector<std::string> kWordPieces = {
    "<pad>",     "<unk>",     "<s>",       "</s>",    "\u2581(S", "\u2581)S", "\u2581(NP",
    "\u2581)NP", "\u2581The", "\u2581cat", "\u2581s", "at",       "\u2581."};
enum : int32_t { Unk = 1, WOpenS = 4, WCloseS, WOpenNP, WCloseNP, The, Cat, S_, At, Dot };

std::shared_ptr<const TreeTokens> word_tokens() {
  return std::make_shared<TreeTokens>(
      TreeTokens::from_pieces(kWordPieces, "words.model", data::TreeLeaves::words));
}

// A lexicalised sequence in the placeholder scheme when it spells `leaves` in order between
// brackets, else nullopt: each word's pieces become XX, a bracket stays.
std::optional<std::string> placeholders(const std::vector<int32_t>& ids, const Leaves& leaves) {
  std::string out;
  size_t word = 0;
  for (size_t i = 0; i < ids.size();) {
    std::string token;
    if (ids[i] >= WOpenS && ids[i] <= WCloseNP) {
      token = kWordPieces[static_cast<size_t>(ids[i++])].substr(3);
    } else {
      if (word >= leaves.size()) return std::nullopt;
      for (int32_t piece : leaves[word])
        if (i >= ids.size() || ids[i++] != piece) return std::nullopt;
      ++word, token = "XX";
    }
    if (!out.empty()) out += ' ';
    out += token;
  }
  if (word != leaves.size()) return std::nullopt;
  return out;
}

bool is_lexical_tree(const std::vector<int32_t>& ids, const Leaves& leaves) {
  const std::optional<std::string> text = placeholders(ids, leaves);
  return text && data::delinearise(*text, std::vector<std::string>(leaves.size(), "w"));
}

TEST(TreeConstraint, TheLexicalisedSchemeSpellsEachWordsPiecesInOrder) {
  // "The sat ." ("sat" in two pieces) and "The zebra" (unknown: <unk>).
  const TreeConstraint c(word_tokens(),
                         WordLeaves{{Leaves{{The}, {S_, At}, {Dot}}, Leaves{{The}, {Unk}}}});
  // The first word's first piece or a constituent; never another word, a close or eos.
  EXPECT_EQ(next_of(*after(c, 0, 20, {})), (V{WOpenS, WOpenNP, The}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {WOpenS, The})), (V{WOpenS, WCloseS, WOpenNP, S_}));
  // Inside a word: only its next piece (no bracket, no eos).
  EXPECT_EQ(next_of(*after(c, 0, 20, {WOpenS, The, S_})), (V{At}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {WOpenS, The, S_, At})), (V{WOpenS, WCloseS, WOpenNP, Dot}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {WOpenS, The, S_, At, Dot})), (V{WCloseS}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {WOpenS, The, S_, At, Dot, WCloseS})), (V{kEos}));
  EXPECT_EQ(next_of(*after(c, 0, 20, {The, S_, At, Dot})), (V{kEos}));
  // The length bound counts pieces: 4 pieces and eos need 5 tokens, a bracket pair 2 more.
  EXPECT_EQ(next_of(*after(c, 0, 5, {})), (V{The}));
  EXPECT_EQ(next_of(*after(c, 0, 6, {})), (V{The}));
  EXPECT_EQ(next_of(*after(c, 0, 7, {})), (V{WOpenS, WOpenNP, The}));
  EXPECT_EQ(next_of(*after(c, 0, 7, {WOpenS, The, S_})), (V{At}));
  EXPECT_EQ(next_of(*after(c, 0, 7, {WOpenS, The, S_, At})), (V{WCloseS, Dot}));
  EXPECT_EQ(next_of(*after(c, 0, 4, {})), V{}) << "no tree of 4 pieces fits 4 tokens";
  // An unknown word is its <unk>.
  EXPECT_EQ(next_of(*after(c, 1, 20, {The})), (V{Unk, WOpenS, WOpenNP}));
  EXPECT_EQ(next_of(*after(c, 1, 20, {The, Unk})), (V{kEos}));
  // Tokens it does not allow are errors: a word out of place, a bracket inside a word.
  EXPECT_THROW(after(c, 0, 20, {Cat}), Error);
  EXPECT_THROW(after(c, 0, 20, {The, Dot}), Error);
  EXPECT_THROW(after(c, 0, 20, {WOpenS, The, S_, WCloseS}), Error);
  EXPECT_THROW(after(c, 0, 20, {The, S_, S_}), Error);
  // The lexicalised vocabulary needs no XX; a word without pieces is refused.
  EXPECT_EQ(word_tokens()->placeholder, -1);
  EXPECT_THROW(TreeConstraint(word_tokens(), std::vector<int64_t>{2}), Error);
  EXPECT_THROW(TreeConstraint(word_tokens(), WordLeaves{{Leaves{{The}, {}}}}), Error);
}

// Random sentences over one- to three-piece words (<unk> among them).
// A lexicalised leaf is scored as the choice of a word there: the first piece of the next word
// pools every piece that starts a word (not the brackets, the middles of words or the specials,
// but <unk>), its other pieces are certain, and nothing is pooled once the words are placed. The
// placeholder scheme pools nothing (its leaf is one token, scored as it is).
TEST(TreeConstraint, ALexicalisedLeafPoolsEveryWordStartAndItsOtherPiecesAreCertain) {
  EXPECT_EQ(word_tokens()->leaf_starts, (V{The, Cat, S_, Dot, Unk}));
  const TreeConstraint c(word_tokens(), WordLeaves{{Leaves{{The}, {S_, At}}}});
  using Pooled = decode::ConstraintState::Pooled;
  const auto pooled = [&](const std::vector<int32_t>& prefix) {
    return after(c, 0, 20, prefix)->pooled();
  };
  const Pooled first = pooled({WOpenS});
  EXPECT_EQ(first.token, The);
  ASSERT_NE(first.members, nullptr);
  EXPECT_EQ(*first.members, (V{The, Cat, S_, Dot, Unk}));
  EXPECT_EQ(pooled({WOpenS, The}).token, S_);
  const Pooled inside = pooled({WOpenS, The, S_});
  EXPECT_EQ(inside.token, At);
  EXPECT_EQ(inside.members, nullptr);
  EXPECT_EQ(pooled({WOpenS, The, S_, At}).token, -1);
  const TreeConstraint placeholder(tokens(), std::vector<int64_t>{2});
  EXPECT_EQ(after(placeholder, 0, 20, {})->pooled().token, -1);
}

std::vector<Leaves> random_leaves(int64_t sentences, std::mt19937_64& rng) {
  const Leaves words = {{The}, {Cat}, {S_, At}, {Dot}, {Unk}, {S_, At, At}};
  std::vector<Leaves> out;
  for (int64_t s = 0; s < sentences; ++s) {
    out.emplace_back();
    const auto n = static_cast<int64_t>(1 + rng() % 12);
    for (int64_t w = 0; w < n; ++w) out.back().push_back(words[rng() % words.size()]);
  }
  return out;
}

// As the placeholder walk: 10,000 steps, every walk a tree that spells each word's pieces in order.
TEST(TreeConstraint, ALexicalisedRandomWalkOnlyWritesTreesSpellingEachWord) {
  std::mt19937_64 rng(46);
  const std::vector<Leaves> leaves = random_leaves(16, rng);
  const TreeConstraint c(word_tokens(), WordLeaves{leaves});
  int64_t steps = 0, sentences = 0;
  while (steps < 10000) {
    const auto source = static_cast<size_t>(rng() % leaves.size());
    int64_t pieces = 0;
    for (const auto& leaf : leaves[source]) pieces += static_cast<int64_t>(leaf.size());
    const int64_t max_length = pieces + 1 + static_cast<int64_t>(rng() % 60);
    auto state = c.start(static_cast<int64_t>(source), max_length);
    const std::optional<V> sequence = random_walk(*state, max_length, rng, steps);
    ASSERT_TRUE(sequence.has_value());
    ASSERT_TRUE(is_lexical_tree(*sequence, leaves[source])) << sequence->size() << " tokens";
    ++sentences;
  }
  EXPECT_GT(sentences, 50);
}

TEST(TreeConstraint, BeamSearchUnderTheLexicalisedOneReturnsOnlyTreesOfTheWords) {
  std::mt19937_64 rng(5);
  const std::vector<Leaves> leaves = random_leaves(5, rng);
  std::vector<int> lengths;  // a source has as many tokens as its words' pieces
  for (const Leaves& sentence : leaves) {
    lengths.push_back(0);
    for (const auto& leaf : sentence) lengths.back() += static_cast<int>(leaf.size());
  }
  const std::vector<std::string> pieces = padded_to_16(kWordPieces);
  expect_searches_return_only(
      pieces, lengths, 12,
      std::make_shared<TreeConstraint>(std::make_shared<TreeTokens>(TreeTokens::from_pieces(
                                           pieces, "test", data::TreeLeaves::words)),
                                       WordLeaves{leaves}),
      [&](size_t s, const V& tokens) { return is_lexical_tree(tokens, leaves[s]); });
}

// Against a trained SentencePiece BPE vocabulary small enough to split words: a word's leaf pieces
// (the word encoded alone) are its pieces inside the source and inside the lexicalised target, as
// the model was trained on them; placeholder_sequence reads the target's ids back as the XX
// sequence, and an unknown character inside a word (<unk>, decoded " ⁇ ") does not split it.
TEST(TreeConstraint, AWordsLeafPiecesAreItsPiecesInsideTheSentenceAndTheTree) {
  testing::TempDir dir;
  const std::vector<std::string> trees = {
      "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
      "(TOP (S (NP (NNS Cats)) (VP (VBD rested) (ADVP (RB quietly))) (. .)))",
      "(TOP (NP (NP (DT a) (NN dog)) (, ,) (NP (DT a) (NN catalogue))))"};
  std::string text;
  for (const std::string& tree : trees) {
    const data::Tree parsed = data::parse_tree(tree);
    text += fmt::format("{}\n{}\n", fmt::join(data::tree_words(parsed), " "),
                        data::linearise(parsed, data::TreeLeaves::words));
  }
  testing::write_text(dir / "train.txt", text);
  data::VocabTrainOptions options;
  options.inputs = {dir / "train.txt"};
  options.output_prefix = dir / "bpe";
  options.vocab_size = 60;
  options.num_threads = 1;
  const data::Vocabulary vocab(data::train_vocabulary(options).model_path);
  int64_t split_words = 0;
  for (std::string tree : trees) {
    if (const size_t a = tree.find("(DT a)"); a != std::string::npos)
      tree.replace(a, 6, "(DT \u00e9a\u00e9)");  // a character the vocabulary has not seen
    const data::Tree parsed = data::parse_tree(tree);
    const std::vector<std::string> words = data::tree_words(parsed);
    const Leaves leaves = leaf_pieces(vocab, words);
    std::vector<int32_t> joined;
    for (const std::vector<int32_t>& leaf : leaves) {
      joined.insert(joined.end(), leaf.begin(), leaf.end());
      split_words += leaf.size() > 1;
    }
    EXPECT_EQ(vocab.encode(parse_source(words)), joined) << tree;
    std::vector<int32_t> target;
    const std::string lexical = data::linearise(parsed, data::TreeLeaves::words);
    size_t word = 0;
    std::istringstream tokens(lexical);
    for (std::string token; tokens >> token;) {
      const bool bracket = token[0] == '(' || token[0] == ')';
      const std::vector<int32_t> ids = bracket ? vocab.encode(token) : leaves.at(word++);
      target.insert(target.end(), ids.begin(), ids.end());
    }
    EXPECT_EQ(vocab.encode(lexical), target) << lexical;
    EXPECT_EQ(placeholder_sequence(vocab.encode(lexical), leaves, vocab), data::linearise(parsed));
  }
  EXPECT_GT(split_words, 3) << "the vocabulary should split some words into several pieces";
  EXPECT_NE(vocab.decode(leaf_pieces(vocab, {"\u00e9a\u00e9"}).front()).find(' '),
            std::string::npos)
      << "the unknown character decodes with spaces around it";
}

}  // namespace
}  // namespace tfm::internal::tasks
