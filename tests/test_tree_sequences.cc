// Trees as sequences (data/tree_sequences.h): linearisation and its inverse on every tree of the
// PTB sample, the well-formedness rules, repair of every kind of ill-formed sequence (and of random
// ones) into a tree over exactly the input's words, tags guessed for punctuation, word escaping and
// the Penn Treebank tokenizer; the lexicalised scheme (words in place of XX) and its reading back.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ptb_sample.h"
#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/tasks/parsing.h"

namespace tfm::internal {
namespace {

using data::parse_tree;
using data::Tree;

std::vector<std::string> words_of(const std::string& text) {
  return data::split_words(text);
}

// No constituent without children anywhere below the root.
bool has_no_empty_constituent(const Tree& tree) {
  for (const Tree& child : tree.children) {
    if (!child.is_leaf() && child.children.empty()) return false;
    if (!has_no_empty_constituent(child)) return false;
  }
  return true;
}

TEST(TreeSequences, LinearisesDepthFirstWithAPlaceholderForEachWord) {
  const Tree tree = parse_tree("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))");
  EXPECT_EQ(data::linearise(tree), "(S (NP XX XX )NP (VP XX )VP XX )S");
  // Unary chains keep every level; an unlabeled root is left out like TOP; another root is kept.
  EXPECT_EQ(data::linearise(parse_tree("( (S (VP (VB Go))))")), "(S (VP XX )VP )S");
  EXPECT_EQ(data::linearise(parse_tree("(S (NP (NN x)))")), "(S (NP XX )NP )S");
  EXPECT_EQ(data::linearise(Tree{}), "");
}

// The lexicalised scheme writes each preterminal's word (escaped) where the placeholder scheme
// writes XX; every other token is the same.
TEST(TreeSequences, TheLexicalisedSchemeWritesTheWordsInPlaceOfXX) {
  using data::TreeLeaves;
  const Tree tree = parse_tree("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))");
  EXPECT_EQ(data::linearise(tree, TreeLeaves::words), "(S (NP The cat )NP (VP sat )VP . )S");
  EXPECT_EQ(data::linearise(tree, TreeLeaves::placeholder), data::linearise(tree));
  // Brackets in words are escaped as in the words file, so no word reads as a bracket token.
  const Tree brackets = Tree::node(
      "NP", {Tree::node("-LRB-", {Tree::leaf("(")}), Tree::node("NN", {Tree::leaf("a(b)")})});
  EXPECT_EQ(data::linearise(brackets, TreeLeaves::words), "(NP -LRB- a-LRB-b-RRB- )NP");
  EXPECT_EQ(data::linearise(parse_tree("( (S (VP (VB Go))))"), TreeLeaves::words),
            "(S (VP Go )VP )S");
  EXPECT_EQ(data::linearise(Tree{}, TreeLeaves::words), "");
  EXPECT_EQ(data::tree_leaves_named("xx"), TreeLeaves::placeholder);
  EXPECT_EQ(data::tree_leaves_named("words"), TreeLeaves::words);
  EXPECT_THROW(data::tree_leaves_named("XX"), Error);
}

// Read back: every token that is not a bracket ("(" or ")" and more) is a leaf, so after
// placeholder_leaves, delinearise and repair read a lexicalised sequence as the XX one; the words
// and tags come from the input whatever the leaves spell.
TEST(TreeSequences, LexicalisedSequencesAreReadThroughThePlaceholderScheme) {
  EXPECT_EQ(data::placeholder_leaves("(S (NP The cat )NP (VP sat )VP . )S"),
            "(S (NP XX XX )NP (VP XX )VP XX )S");
  EXPECT_EQ(data::placeholder_leaves("  ( ) -LRB- XX (NP\t)NP "), "XX XX XX XX (NP )NP");
  EXPECT_EQ(data::placeholder_leaves(""), "");
  const std::vector<std::string> words = words_of("The cat sat .");
  const std::optional<Tree> tree =
      data::delinearise(data::placeholder_leaves("(S (NP The cat )NP (VP sat )VP . )S"), words,
                        {"DT", "NN", "VBD", "."});
  ASSERT_TRUE(tree);
  EXPECT_EQ(data::to_string(*tree), "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))");
  // Wrong words in the right places still give the input's words; one leaf too many does not.
  EXPECT_TRUE(
      data::delinearise(data::placeholder_leaves("(S (NP A dog )NP (VP ran )VP ! )S"), words));
  EXPECT_FALSE(
      data::delinearise(data::placeholder_leaves("(S (NP The cat )NP sat sat . )S"), words));
  const data::Repaired repaired =
      data::repair(data::placeholder_leaves("(S (NP The cat )NP (VP sat sat )VP . )S"), words);
  EXPECT_EQ(repaired.edits, 1);
  EXPECT_EQ(data::tree_words(repaired.tree), words);
  EXPECT_EQ(
      data::repair(data::placeholder_leaves("(S (NP The cat )NP (VP sat )VP . )S"), words).edits,
      0);
}

TEST(TreeSequences, DelineariseIsTheInverseOnEveryTreeOfTheSample) {
  const std::filesystem::path dir = testing::ptb_sample_dir();
  if (dir.empty())
    GTEST_SKIP()
        << "the PTB sample is not at $TFM_DATA_DIR/ptb-sample or ../shared/data/ptb-sample";
  const std::vector<Tree> trees = data::read_tree_file(dir / "wsj_sample.trees.gz");
  ASSERT_EQ(trees.size(), 3914u);
  int wrong = 0;
  for (size_t i = 0; i < trees.size(); ++i) {
    const Tree clean = data::normalise(trees[i]);
    const std::string sequence = data::linearise(clean);
    const std::optional<Tree> back =
        data::delinearise(sequence, data::tree_words(clean), data::tree_tags(clean));
    if ((!back || *back != clean) && ++wrong <= 3)
      ADD_FAILURE() << "tree " << i + 1 << ": " << data::to_string(clean) << "\n  sequence "
                    << sequence << "\n  back " << (back ? data::to_string(*back) : "(ill formed)");
    // The lexicalised sequence reads back to the same tree; its leaves are the escaped words.
    const std::string lexical = data::linearise(clean, data::TreeLeaves::words);
    EXPECT_EQ(data::placeholder_leaves(lexical), sequence) << lexical;
    // Repair leaves a well-formed sequence as it is.
    if (i % 13 == 0) {
      const data::Repaired repaired =
          data::repair(sequence, data::tree_words(clean), data::tree_tags(clean));
      EXPECT_EQ(repaired.edits, 0);
      EXPECT_EQ(repaired.tree, clean);
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(TreeSequences, TagsArePutBackOrGuessedForPunctuation) {
  const auto words = words_of("He left .");
  EXPECT_EQ(data::to_string(
                *data::delinearise("(S (NP XX )NP (VP XX )VP XX )S", words, {"PRP", "VBD", "."})),
            "(TOP (S (NP (PRP He)) (VP (VBD left)) (. .)))");
  EXPECT_EQ(data::to_string(*data::delinearise("(S (NP XX )NP (VP XX )VP XX )S", words)),
            "(TOP (S (NP (XX He)) (VP (XX left)) (. .)))");
  EXPECT_EQ(data::guess_tag(","), ",");
  EXPECT_EQ(data::guess_tag("?"), ".");
  EXPECT_EQ(data::guess_tag("--"), ":");
  EXPECT_EQ(data::guess_tag("``"), "``");
  EXPECT_EQ(data::guess_tag("-RRB-"), "-RRB-");
  EXPECT_EQ(data::guess_tag("$"), "$");
  EXPECT_EQ(data::guess_tag("dog"), "XX");
}

TEST(TreeSequences, IllFormedSequencesAreRejected) {
  const auto words = words_of("a b");
  const std::vector<std::string> ill_formed = {
      "(S XX XX",             // never closed
      "(S XX XX )S )S",       // closes nothing
      "(S (NP XX XX )S )NP",  // crossed
      "(S XX )S",             // a word short
      "(S XX XX XX )S",       // a word too many
      "(S (NP )NP XX XX )S",  // an empty constituent
      "(S XX dog XX )S",      // not a token of the scheme
      "(S XX XX )",           // a bare bracket
      "",                     // nothing
  };
  for (const std::string& sequence : ill_formed)
    EXPECT_FALSE(data::delinearise(sequence, words)) << sequence;
  EXPECT_TRUE(data::delinearise("(S XX XX )S", words));
  // Preterminals directly under the root, or two constituents there, are trees too.
  EXPECT_EQ(data::to_string(*data::delinearise("XX (NP XX )NP", words)),
            "(TOP (XX a) (NP (XX b)))");
}

TEST(TreeSequences, RepairMakesATreeOverTheWordsFromEveryKindOfIllFormedSequence) {
  const auto words = words_of("the cat sat");
  const std::vector<std::string> tags = {"DT", "NN", "VBD"};
  struct Case {
    std::string sequence, tree;
    int64_t edits;
  };
  const std::vector<Case> cases = {
      // A bracket never closed: closed at the end.
      {"(S (NP XX XX )NP (VP XX", "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat))))", 2},
      // A close of nothing open: dropped.
      {"(S (NP XX XX )NP )VP (VP XX )VP )S", "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat))))", 1},
      // A close of an outer bracket: the inner one closes first.
      {"(S (NP XX XX (VP XX )S", "(TOP (S (NP (DT the) (NN cat) (VP (VBD sat)))))", 2},
      // Too few placeholders: the last words join the innermost open constituent.
      {"(S (NP XX )NP (VP XX", "(TOP (S (NP (DT the)) (VP (NN cat) (VBD sat))))", 3},
      // Too many: the extra one is dropped (and the VP it left empty removed).
      {"(S (NP XX XX XX )NP (VP XX )VP )S", "(TOP (S (NP (DT the) (NN cat) (VBD sat))))", 2},
      // An empty constituent is removed.
      {"(S (NP XX XX )NP (ADVP )ADVP (VP XX )VP )S",
       "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat))))", 1},
      // Tokens outside the scheme are dropped.
      {"(S (NP XX <unk> XX )NP (VP XX )VP )S", "(TOP (S (NP (DT the) (NN cat)) (VP (VBD sat))))",
       1},
      // Nothing at all: the words under the root.
      {"", "(TOP (DT the) (NN cat) (VBD sat))", 3},
      // Brackets opened after the last word are empty: removed.
      {"(S XX XX XX )S (NP (PP", "(TOP (S (DT the) (NN cat) (VBD sat)))", 2},
  };
  for (const Case& c : cases) {
    const data::Repaired repaired = data::repair(c.sequence, words, tags);
    EXPECT_EQ(data::to_string(repaired.tree), c.tree) << c.sequence;
    EXPECT_EQ(repaired.edits, c.edits) << c.sequence;
    EXPECT_EQ(data::tree_words(repaired.tree), words) << c.sequence;
    // What repair gives is well formed: it linearises and comes back unchanged.
    EXPECT_EQ(data::delinearise(data::linearise(repaired.tree), words, tags), repaired.tree);
  }
}

TEST(TreeSequences, RepairOfRandomSequencesAlwaysGivesATreeOverTheWords) {
  const std::vector<std::string> vocabulary = {"(S", ")S", "(NP", ")NP", "(VP",  ")VP",
                                               "XX", "XX", "XX",  ")PP", "junk", "(PP"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> words;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) words.push_back(fmt::format("w{}", i));
    std::string sequence;
    const int length = static_cast<int>(rng() % 24);
    for (int i = 0; i < length; ++i) {
      sequence += vocabulary[rng() % vocabulary.size()];
      sequence += ' ';
    }
    const data::Repaired repaired = data::repair(sequence, words);
    ASSERT_EQ(data::tree_words(repaired.tree), words) << sequence;
    ASSERT_EQ(repaired.tree.label, "TOP") << sequence;
    ASSERT_TRUE(has_no_empty_constituent(repaired.tree)) << sequence;
    const bool well_formed = data::delinearise(sequence, words).has_value();
    ASSERT_EQ(repaired.edits == 0, well_formed) << sequence;
    ASSERT_EQ(data::delinearise(data::linearise(repaired.tree), words), repaired.tree) << sequence;
  }
}

TEST(TreeSequences, WordsAreEscapedAndRawTextTokenisedAsThePennTreebank) {
  EXPECT_EQ(data::escape_word("("), "-LRB-");
  EXPECT_EQ(data::escape_word("}"), "-RCB-");
  EXPECT_EQ(data::escape_word("a(b)"), "a-LRB-b-RRB-");
  EXPECT_EQ(words_of("  x\t(y)  "), (std::vector<std::string>{"x", "-LRB-y-RRB-"}));
  EXPECT_EQ(data::ptb_tokenize("\"They're here,\" she said (twice) -- didn't she?"),
            (std::vector<std::string>{"``", "They", "'re", "here", ",", "''", "she", "said",
                                      "-LRB-", "twice", "-RRB-", "--", "did", "n't", "she", "?"}));
  EXPECT_EQ(data::ptb_tokenize("It costs $5.50, I'm told... Mr. Smith's cannot."),
            (std::vector<std::string>{"It", "costs", "$", "5.50", ",", "I", "'m", "told", "...",
                                      "Mr.", "Smith", "'s", "can", "not", "."}));
  EXPECT_TRUE(data::ptb_tokenize("   ").empty());
}

TEST(TreeSequences, TheBestWellFormedHypothesisWinsAndRepairIsTheLastResort) {
  const tasks::ParseInput input{words_of("He left ."), {"PRP", "VBD", "."}};
  tasks::ParseCounts counts;
  // The best hypothesis misses a word; the second and third are trees.
  const std::vector<std::string> beam = {"(S (NP XX )NP XX )S", "(S (NP XX )NP (VP XX )VP XX )S",
                                         "(S XX XX XX )S"};
  tasks::ParseResult result = tasks::choose_trees(beam, {-1.0, -2.0, -3.0}, input, 1, &counts);
  ASSERT_EQ(result.trees.size(), 1u);
  EXPECT_EQ(data::to_string(result.trees[0].tree), "(TOP (S (NP (PRP He)) (VP (VBD left)) (. .)))");
  EXPECT_EQ(result.trees[0].rank, 1);
  EXPECT_EQ(result.trees[0].score, -2.0);
  EXPECT_EQ(result.trees[0].repairs, 0);
  EXPECT_EQ(counts.sentences, 1);
  EXPECT_EQ(counts.best_ill_formed, 1);
  EXPECT_EQ(counts.repaired, 0);

  // n-best: the well-formed ones by score, then the repaired ones.
  result = tasks::choose_trees(beam, {-1.0, -2.0, -3.0}, input, 3, &counts);
  ASSERT_EQ(result.trees.size(), 3u);
  EXPECT_EQ(result.trees[0].rank, 1);
  EXPECT_EQ(result.trees[1].rank, 2);
  EXPECT_EQ(result.trees[2].rank, 0);
  EXPECT_EQ(result.trees[2].repairs, 1);
  EXPECT_EQ(data::tree_words(result.trees[2].tree), input.words);

  // No tree in the beam: the best is repaired, and counted.
  counts = {};
  result = tasks::choose_trees({"(S XX )S", "(NP XX"}, {-1.0, -1.5}, input, 1, &counts);
  ASSERT_EQ(result.trees.size(), 1u);
  EXPECT_EQ(result.trees[0].rank, 0);
  EXPECT_EQ(data::to_string(result.trees[0].tree), "(TOP (S (PRP He)) (VBD left) (. .))");
  EXPECT_EQ(counts.repaired, 1);
  // No hypothesis at all: the words under the root.
  result = tasks::choose_trees({}, {}, input, 1, &counts);
  EXPECT_EQ(data::to_string(result.trees.at(0).tree), "(TOP (PRP He) (VBD left) (. .))");
}

}  // namespace
}  // namespace tfm::internal
