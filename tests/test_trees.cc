// Bracketed trees (data/trees.h): reading one tree a line and .mrg text, the one-line errors with
// file:line:column, writing back, and normalisation checked on every tree of the PTB sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ptb_sample.h"
#include "temp_dir.h"
#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/eval/evalb.h"
#include "tfm/io/text_lines.h"

namespace tfm::internal {
namespace {

using data::parse_tree;
using data::parse_trees;
using data::Tree;
using testing::error_of;
using testing::ptb_sample_dir;

TEST(Trees, ReadsAndWritesOneLine) {
  const Tree tree = parse_tree("(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))");
  EXPECT_EQ(tree.label, "TOP");
  ASSERT_EQ(tree.children.size(), 1u);
  EXPECT_EQ(tree.children[0].label, "S");
  EXPECT_TRUE(tree.children[0].children[0].children[0].is_preterminal());
  EXPECT_EQ(data::to_string(tree), "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .)))");
  EXPECT_EQ(data::tree_words(tree), (std::vector<std::string>{"The", "cat", "sat", "."}));
  EXPECT_EQ(data::tree_tags(tree), (std::vector<std::string>{"DT", "NN", "VBD", "."}));

  // The unlabeled root of the .mrg files, spaces before ')' and line breaks anywhere.
  const Tree raw = parse_tree("( (S \n  (NP-SBJ (PRP It) )\n  (VP (VBZ works) )) )");
  EXPECT_EQ(raw.label, "");
  EXPECT_EQ(data::to_string(raw), "( (S (NP-SBJ (PRP It)) (VP (VBZ works))))");
  EXPECT_EQ(parse_tree(data::to_string(raw)), raw);
  // Labels and words may hold any character but white space and brackets.
  EXPECT_EQ(data::to_string(parse_tree("(TOP (-LRB- -LCB-) (PRP$ his) (`` ``))")),
            "(TOP (-LRB- -LCB-) (PRP$ his) (`` ``))");
  // "()" is the empty tree.
  EXPECT_TRUE(parse_tree(" () ").empty());
  EXPECT_EQ(data::to_string(Tree{}), "()");
}

TEST(Trees, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(error_of([] { parse_tree("(S (NP (DT a) (NN b))", "f.trees", 7); }),
            "f.trees:7:1: unbalanced brackets: this '(' is never closed");
  EXPECT_EQ(error_of([] { parse_tree("(S (NN b)))", "f", 1); }),
            "f:1:11: stray text after the tree (one tree expected)");
  EXPECT_EQ(error_of([] { parse_tree(") (S (NN b))", "f", 1); }),
            "f:1:1: unbalanced brackets: ')' closes nothing");
  EXPECT_EQ(error_of([] { parse_tree("(S ( (NN b)))", "f", 1); }),
            "f:1:4: empty label (only the outer root may be unlabeled)");
  EXPECT_EQ(error_of([] { parse_tree("(S (NN a b))", "f", 1); }),
            "f:1:10: stray text 'b' after the word 'a' of (NN ...): a preterminal holds one word");
  EXPECT_EQ(error_of([] { parse_tree("(S (NP (NN a)) stray)", "f", 1); }),
            "f:1:16: stray text 'stray' among the constituents of (S ...)");
  EXPECT_EQ(error_of([] { parse_tree("(S (NP))", "f", 1); }),
            "f:1:4: constituent (NP) has no children");
  EXPECT_EQ(error_of([] { parse_tree("word", "f", 1); }),
            "f:1:1: stray text 'word' outside a tree");
  EXPECT_EQ(error_of([] { parse_tree("  ", "f", 3); }), "f:3:1: no tree (the text is empty)");
  // Lines and columns count across the lines of a multi-line tree.
  EXPECT_EQ(error_of([] {
              data::parse_trees({"( (S", "  (NP (NN a) b)))"}, "g.mrg");
            }),
            "g.mrg:2:14: stray text 'b' among the constituents of (NP ...)");
}

TEST(Trees, OneTreeALineOrMrgText) {
  // One tree a line: an empty line is the empty tree (a sentence without a parse).
  const std::vector<Tree> lines =
      data::parse_trees({"(TOP (NN a))", "", "(TOP (NN b))", "()"}, "t");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(data::to_string(lines[0]), "(TOP (NN a))");
  EXPECT_TRUE(lines[1].empty());
  EXPECT_EQ(data::to_string(lines[2]), "(TOP (NN b))");
  EXPECT_TRUE(lines[3].empty());
  EXPECT_EQ(error_of([] { data::parse_trees({"(TOP (NN a)) (TOP (NN b))"}, "t"); }),
            "t:1: a second tree on the line (one tree a line, or PTB .mrg text)");
  // .mrg text: trees span lines, blank lines separate them.
  const std::vector<Tree> mrg =
      data::parse_trees({"", "( (S (NP (NN a))", "    (VP (VB b)) ))", "", "( (NP (NN c)) )"}, "m");
  ASSERT_EQ(mrg.size(), 2u);
  EXPECT_EQ(data::to_string(mrg[0]), "( (S (NP (NN a)) (VP (VB b))))");
  EXPECT_EQ(data::to_string(mrg[1]), "( (NP (NN c)))");
}

TEST(Trees, NormaliseAsParserEvaluationsDo) {
  EXPECT_EQ(data::strip_function_tags("NP-SBJ-1"), "NP");
  EXPECT_EQ(data::strip_function_tags("PP-LOC=2"), "PP");
  EXPECT_EQ(data::strip_function_tags("NP=2"), "NP");
  EXPECT_EQ(data::strip_function_tags("-NONE-"), "-NONE-");
  EXPECT_EQ(data::strip_function_tags("-LRB-"), "-LRB-");
  EXPECT_EQ(data::strip_function_tags("PRP$"), "PRP$");
  // Stripping "=2" would leave an empty label, which normalised trees written as evalb's gold could
  // not hold (they would not read back).
  EXPECT_EQ(data::strip_function_tags("=2"), "=2");
  EXPECT_EQ(data::to_string(data::normalise(parse_tree("(S (=2 (NN x)))"))),
            "(TOP (S (=2 (NN x))))");
  // The empty element goes, and with it the S and SBAR that held only empty elements.
  const Tree raw = parse_tree(
      "( (S (NP-SBJ-1 (PRP He)) (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-1)))) "
      "(-LRB- -LRB-) (. .)) )");
  EXPECT_EQ(data::to_string(data::normalise(raw)),
            "(TOP (S (NP (PRP He)) (VP (VBD said)) (-LRB- -LRB-) (. .)))");
  // TOP stays TOP; any other root gets a TOP above it; nothing left is the empty tree.
  EXPECT_EQ(data::to_string(data::normalise(parse_tree("(TOP (NP-TMP (NN x)))"))),
            "(TOP (NP (NN x)))");
  EXPECT_EQ(data::to_string(data::normalise(parse_tree("(S (NP (NN x)))"))),
            "(TOP (S (NP (NN x))))");
  EXPECT_TRUE(data::normalise(parse_tree("( (S (-NONE- *)))")).empty());
}

TEST(Trees, NormalisingTheSampleGivesItsCleanTrees) {
  const std::filesystem::path dir = ptb_sample_dir();
  if (dir.empty()) {
    GTEST_SKIP()
        << "the PTB sample is not at $TFM_DATA_DIR/ptb-sample or ../shared/data/ptb-sample";
  }
  const std::vector<Tree> raw = data::read_tree_file(dir / "wsj_sample.trees.gz");
  const std::vector<std::string> clean = read_text_lines(dir / "wsj_sample.clean.trees.gz");
  ASSERT_EQ(raw.size(), 3914u);
  ASSERT_EQ(clean.size(), raw.size());
  int wrong = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string got = data::to_string(data::normalise(raw[i]));
    if (got != clean[i] && ++wrong <= 3) {
      ADD_FAILURE() << "line " << i + 1 << ":\n  got  " << got << "\n  want " << clean[i];
    }
    // The clean line reads back to the same tree.
    if (i % 97 == 0) {
      EXPECT_EQ(data::to_string(parse_tree(clean[i])), clean[i]);
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Trees, ReadsTheSamplesMrgFileLikeItsLines) {
  const std::filesystem::path dir = ptb_sample_dir();
  if (dir.empty()) {
    GTEST_SKIP()
        << "the PTB sample is not at $TFM_DATA_DIR/ptb-sample or ../shared/data/ptb-sample";
  }
  testing::TempDir tmp;
  const std::string command = "tar xzf '" + (dir / "wsj_sample_combined_mrg.tar.gz").string() +
                              "' -C '" + tmp.path().string() + "' combined/wsj_0001.mrg";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::vector<Tree> mrg = data::read_tree_file(tmp / "combined/wsj_0001.mrg");
  const std::vector<Tree> lines = data::read_tree_file(dir / "wsj_sample.trees.gz");
  ASSERT_EQ(mrg.size(), 2u);  // wsj_0001 holds the sample's first two sentences
  EXPECT_EQ(mrg[0], lines[0]);
  EXPECT_EQ(mrg[1], lines[1]);
}

// A chain of `depth` brackets: (TOP (A (A ... (X y)...))), TOP and the preterminal included.
std::string nested_tree(int64_t depth) {
  std::string text = "(TOP ";
  for (int64_t i = 2; i < depth; ++i) text += "(A ";
  text += "(X y)";
  text += std::string(static_cast<size_t>(depth - 1), ')');
  return text;
}

int64_t depth_of(const Tree& tree) {
  int64_t deepest = 0;
  for (const Tree& child : tree.children)
    if (!child.is_leaf()) deepest = std::max(deepest, depth_of(child));
  return deepest + 1;
}

// Every walk over a tree recurses per level, so the reader refuses a tree nested deeper than
// kMaxTreeDepth (a 100,000-deep one crashed tfm evalb, parse and linearise) with a one-line error
// at the bracket that goes too deep; a tree of exactly the limit reads, writes, linearises and
// scores.
TEST(Trees, NestingDeeperThanTheLimitIsAnErrorAtTheBracket) {
  const std::string deep = nested_tree(100000);
  const std::string message = error_of([&] { parse_trees({"(TOP (X a))", deep}, "deep.txt"); });
  EXPECT_EQ(message,
            "deep.txt:2:3003: brackets nested more than 1000 levels deep (too deep for a parse "
            "tree)");
  EXPECT_NE(error_of([&] { parse_tree(nested_tree(data::kMaxTreeDepth + 1)); }), "");

  const std::string limit = nested_tree(data::kMaxTreeDepth);
  const Tree tree = parse_tree(limit);
  EXPECT_EQ(depth_of(tree), data::kMaxTreeDepth);
  EXPECT_EQ(data::to_string(tree), limit);
  EXPECT_EQ(data::tree_words(data::normalise(tree)), std::vector<std::string>{"y"});
  const std::string sequence = data::linearise(tree);
  EXPECT_EQ(data::delinearise(sequence, {"y"}, {"X"}), tree);
  const eval::EvalbResult result = eval::evalb({tree}, {tree}, eval::evalb_params("collins"));
  EXPECT_EQ(result.all.matched, data::kMaxTreeDepth - 2);  // TOP deleted, the preterminal a word
  EXPECT_EQ(result.all.f1(), 100.0);
}

// Sequences build trees too (a model's output, a dev set's references): one nested deeper than
// the limit is not a tree, and repair drops the levels beyond it.
TEST(Trees, SequencesNestedTooDeepAreNotTreesAndRepairDropsTheExtraLevels) {
  std::string sequence;
  for (int i = 0; i < 100000; ++i) sequence += "(A ";
  sequence += "XX";
  for (int i = 0; i < 100000; ++i) sequence += " )A";
  EXPECT_FALSE(data::delinearise(sequence, {"y"}));
  const data::Repaired repaired = data::repair(sequence, {"y"});
  EXPECT_EQ(depth_of(repaired.tree), data::kMaxTreeDepth);
  EXPECT_EQ(data::tree_words(repaired.tree), std::vector<std::string>{"y"});
  EXPECT_GT(repaired.edits, 0);
}

}  // namespace
}  // namespace tfm::internal
