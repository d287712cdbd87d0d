// EVALB (eval/evalb.h) on hand-derived cases, every number worked out by hand in the comments
// from evalb.c's rules, the .prm reader, and gold against itself on the PTB sample; then
// `tfm evalb` on temporary files (CliEvalb).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "ptb_sample.h"
#include "temp_dir.h"
#include "tfm/core/error.h"
#include "tfm/data/trees.h"
#include "tfm/eval/evalb.h"

namespace tfm::internal {
namespace {

using data::Tree;
using testing::error_of;
using testing::ptb_sample_dir;

std::vector<Tree> trees(const std::vector<std::string>& lines) {
  std::vector<Tree> out;
  for (const std::string& line : lines) out.push_back(data::parse_tree(line));
  return out;
}

// Words after COLLINS.prm's deletion: The cat sat on the mat (the '.' goes: 6 words, length 7).
// Brackets: TOP (deleted), S 0-6, NP 0-2, VP 2-6, PP 3-6, NP 4-6: 5.
const std::string kCat =
    "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))";

std::string long_sentence(const std::string& label) {  // 41 words: S 0-41 and label 0-41
  std::string words;
  for (int i = 0; i < 41; ++i) words += fmt::format(" (NN w{})", i);
  return fmt::format("(TOP (S ({}{})))", label, words);
}

struct Case {
  std::string gold, test;
};

// The nine sentences of the table below, each a kind of difference.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // 1 identical: 5 of 5 and 5, 6 words, 6 tags.
      {kCat, kCat},
      // 2 one wrong label (PP -> ADJP over 3-6): 4 matched of 5 and 5: 80.00 / 80.00.
      {kCat,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (ADJP (IN on) (NP (DT the) (NN mat)))) (. "
       ".)))"},
      // 3 a crossing bracket: test PP 3-5 crosses gold NP 4-6 (4 > 3, 4 < 5, 6 > 5); test has
      // S, NP, VP, PP: 4, matched S NP VP: 3 of 5 gold: 60.00 / 75.00, 1 crossing.
      {kCat,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (DT the)) (NN mat)) (. .)))"},
      // 4 ADVP counts as PRT (EQ_LABEL), but the tags RP and RB differ: 4 of 4 and 4, 2 of 3
      // tags: 66.67.
      {"(TOP (S (NP (PRP He)) (VP (VBD gave) (PRT (RP up)))))",
       "(TOP (S (NP (PRP He)) (VP (VBD gave) (ADVP (RB up)))))"},
      // 5 a unary chain NP -> NP: the inner NP 0-1 matches the gold NP, the outer one nothing:
      // 3 of 3 gold and 4 test: 100.00 / 75.00.
      {"(TOP (S (NP (NNP John)) (VP (VBZ runs))))",
       "(TOP (S (NP (NP (NNP John))) (VP (VBZ runs))))"},
      // 6 a word missing: Length unmatch (2|1), an error sentence (status 1) of length 2.
      {"(TOP (S (NP (NNP John)) (VP (VBZ runs))))", "(TOP (S (VP (VBZ runs))))"},
      // 7 the empty tree: skipped (status 2), length 7.
      {kCat, "()"},
      // 8 the '.' attached lower: punctuation is deleted, so the spans are the same: 5 of 5.
      {kCat,
       "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat))) (. "
       ".))))"},
      // 9 41 words (over CUTOFF_LEN 40): S matches, NP vs VP does not: 1 of 2 and 2.
      {long_sentence("NP"), long_sentence("VP")},
  };
  return all;
}

TEST(Evalb, HandDerivedTable) {
  std::vector<Tree> gold, test;
  for (const Case& c : cases()) {
    gold.push_back(data::parse_tree(c.gold));
    test.push_back(data::parse_tree(c.test));
  }
  const eval::EvalbResult result = eval::evalb(gold, test, eval::evalb_params("collins"));
  ASSERT_FALSE(result.stopped);
  ASSERT_EQ(result.sentences.size(), 9u);
  struct Row {
    int length, status, matched, gold, test, crossing, words, tags;
  };
  const std::vector<Row> want = {
      {7, 0, 5, 5, 5, 0, 6, 6}, {7, 0, 4, 5, 5, 0, 6, 6}, {7, 0, 3, 5, 4, 1, 6, 6},
      {3, 0, 4, 4, 4, 0, 3, 2}, {2, 0, 3, 3, 4, 0, 2, 2}, {2, 1, 0, 0, 0, 0, 0, 0},
      {7, 2, 0, 0, 0, 0, 0, 0}, {7, 0, 5, 5, 5, 0, 6, 6}, {41, 0, 1, 2, 2, 0, 41, 41},
  };
  for (size_t i = 0; i < want.size(); ++i) {
    const eval::EvalbSentence& s = result.sentences[i];
    SCOPED_TRACE("sentence " + std::to_string(i + 1));
    EXPECT_EQ(s.id, static_cast<int>(i) + 1);
    EXPECT_EQ(s.length, want[i].length);
    EXPECT_EQ(s.status, want[i].status);
    EXPECT_EQ(s.matched, want[i].matched);
    EXPECT_EQ(s.gold_brackets, want[i].gold);
    EXPECT_EQ(s.test_brackets, want[i].test);
    EXPECT_EQ(s.crossing, want[i].crossing);
    EXPECT_EQ(s.words, want[i].words);
    EXPECT_EQ(s.correct_tags, want[i].tags);
  }
  EXPECT_EQ(result.sentences[5].error, "Length unmatch (2|1)");
  EXPECT_EQ(eval::format_evalb_errors(result), "6 : Length unmatch (2|1)\n");

  // All: 9 sentences, 1 error, 1 skip, 7 valid. Matched 5+4+3+4+3+5+1 = 25, gold
  // 5+5+5+4+3+5+2 = 29, test 5+5+4+4+4+5+2 = 29: 25/29 = 86.21 each. Complete: 1, 4, 8 = 3/7 =
  // 42.86. Crossing 1: 1/7 = 0.14 average, 6/7 = 85.71 without, 7/7 two or less. Words
  // 6+6+6+3+2+6+41 = 70, tags 69: 98.57.
  // len<=40 (sentence 9 out): 8, 1 error, 1 skip, 6 valid; 24 of 27 and 27: 88.89; complete 3/6
  // = 50.00; crossing 1/6 = 0.17, 5/6 = 83.33 without; words 29, tags 28: 96.55.
  const std::string report = eval::format_evalb(result);
  const std::string expected_tail =
      "   3    7    0   60.00  75.00     3      5    4      1      6     6   100.00\n"
      "   4    3    0  100.00 100.00     4      4    4      0      3     2    66.67\n"
      "   5    2    0  100.00  75.00     3      3    4      0      2     2   100.00\n"
      "   6    2    1    0.00   0.00     0      0    0      0      0     0     0.00\n"
      "   7    7    2    0.00   0.00     0      0    0      0      0     0     0.00\n"
      "   8    7    0  100.00 100.00     5      5    5      0      6     6   100.00\n"
      "   9   41    0   50.00  50.00     1      2    2      0     41    41   100.00\n"
      "============================================================================\n"
      "                 86.21  86.21     25    29    29      1     70    69    98.57\n"
      "=== Summary ===\n"
      "\n"
      "-- All --\n"
      "Number of sentence        =      9\n"
      "Number of Error sentence  =      1\n"
      "Number of Skip  sentence  =      1\n"
      "Number of Valid sentence  =      7\n"
      "Bracketing Recall         =  86.21\n"
      "Bracketing Precision      =  86.21\n"
      "Bracketing FMeasure       =  86.21\n"
      "Complete match            =  42.86\n"
      "Average crossing          =   0.14\n"
      "No crossing               =  85.71\n"
      "2 or less crossing        = 100.00\n"
      "Tagging accuracy          =  98.57\n"
      "\n"
      "-- len<=40 --\n"
      "Number of sentence        =      8\n"
      "Number of Error sentence  =      1\n"
      "Number of Skip  sentence  =      1\n"
      "Number of Valid sentence  =      6\n"
      "Bracketing Recall         =  88.89\n"
      "Bracketing Precision      =  88.89\n"
      "Bracketing FMeasure       =  88.89\n"
      "Complete match            =  50.00\n"
      "Average crossing          =   0.17\n"
      "No crossing               =  83.33\n"
      "2 or less crossing        = 100.00\n"
      "Tagging accuracy          =  96.55\n";
  const std::string head =
      "  Sent.                        Matched  Bracket   Cross        Correct Tag\n"
      " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy\n"
      "============================================================================\n"
      "   1    7    0  100.00 100.00     5      5    5      0      6     6   100.00\n"
      "   2    7    0   80.00  80.00     4      5    5      0      6     6   100.00\n";
  EXPECT_EQ(report, head + expected_tail);
}

TEST(Evalb, EmptyElementsRootsAndLength) {
  // Raw treebank form under COLLINS.prm: the unlabeled root is a bracket labelled "" (evalb reads
  // "( (S" so), NP-SBJ over the -NONE- word is empty (0-0) and set aside. Brackets "" 0-1, S 0-1,
  // VP 0-1: 3. Words: go (1); length: go and '.' (2), -NONE- does not count.
  const std::vector<Tree> raw = trees({"( (S (NP-SBJ (-NONE- *)) (VP (VB go)) (. .)) )"});
  const eval::EvalbResult result = eval::evalb(raw, raw, eval::evalb_params("collins"));
  EXPECT_EQ(result.sentences[0].gold_brackets, 3);
  EXPECT_EQ(result.sentences[0].matched, 3);
  EXPECT_EQ(result.sentences[0].words, 1);
  EXPECT_EQ(result.sentences[0].length, 2);
  // So a TOP test tree against an unlabeled gold root misses the "" bracket: 2 of 3 gold and 2.
  const eval::EvalbResult mixed =
      eval::evalb(raw, trees({"(TOP (S (NP-SBJ (-NONE- *)) (VP (VB go)) (. .)))"}),
                  eval::evalb_params("collins"));
  EXPECT_EQ(mixed.sentences[0].matched, 2);
  EXPECT_EQ(mixed.sentences[0].test_brackets, 2);
  // A word mismatch is an error sentence too.
  const eval::EvalbResult words =
      eval::evalb(trees({"(TOP (S (NN a) (NN b)))"}), trees({"(TOP (S (NN a) (NN c)))"}),
                  eval::evalb_params("collins"));
  EXPECT_EQ(words.sentences[0].status, 1);
  EXPECT_EQ(words.sentences[0].error, "Words unmatch (b|c)");
  // No brackets at all: the totals line has only its word columns, and F1 is 0/0, which evalb
  // prints as glibc prints the x86 NaN.
  const std::string one_word = eval::format_evalb(
      eval::evalb(trees({"(TOP (NN a))"}), trees({"(TOP (NN a))"}), eval::evalb_params("collins")));
  EXPECT_NE(one_word.find("=====\n      1     1   100.00\n"), std::string::npos) << one_word;
  EXPECT_NE(one_word.find("Bracketing FMeasure       =   -nan\n"), std::string::npos);
}

TEST(Evalb, NkDeletesQuestionMarksAndRepairsQuotes) {
  // '?' is deleted by nk.prm, not by COLLINS.prm: 2 words against 3.
  const std::vector<Tree> question = trees({"(TOP (SQ (VBZ Is) (NP (PRP it)) (? ?)))"});
  EXPECT_EQ(eval::evalb(question, question, eval::evalb_params("nk")).sentences[0].words, 2);
  EXPECT_EQ(eval::evalb(question, question, eval::evalb_params("collins")).sentences[0].words, 3);
  // A possessive ' tagged POS in gold and '' (deleted) in the test: COLLINS.prm sees 3 words
  // against 2, an error. nk.prm's quote labels put the test's ' back at index 1 and widen the
  // brackets open around it (TOP 0-2 -> 0-3, NP 0-2 -> 0-3, NP 0-1 -> 0-2): NP 0-3 and NP 0-2
  // match (TOP is deleted): 2 of 2; tags POS vs '' differ: 2 of 3.
  const std::vector<Tree> gold = trees({"(TOP (NP (NP (NNP John) (POS ')) (NN book)))"});
  const std::vector<Tree> test = trees({"(TOP (NP (NP (NNP John) ('' ')) (NN book)))"});
  EXPECT_EQ(eval::evalb(gold, test, eval::evalb_params("collins")).sentences[0].error,
            "Length unmatch (3|2)");
  const eval::EvalbSentence nk = eval::evalb(gold, test, eval::evalb_params("nk")).sentences[0];
  EXPECT_EQ(nk.status, 0);
  EXPECT_EQ(nk.matched, 2);
  EXPECT_EQ(nk.gold_brackets, 2);
  EXPECT_EQ(nk.test_brackets, 2);
  EXPECT_EQ(nk.words, 3);
  EXPECT_EQ(nk.correct_tags, 2);
}

TEST(Evalb, StopsAfterMaxErrors) {
  // COLLINS.prm's MAX_ERROR 10: evalb exits at the error that finds more than 10 before it, the
  // 12th, without its row or a summary.
  std::vector<Tree> gold(15, data::parse_tree("(TOP (S (NN a) (NN b)))"));
  std::vector<Tree> test(15, data::parse_tree("(TOP (S (NN a)))"));
  const eval::EvalbResult collins = eval::evalb(gold, test, eval::evalb_params("collins"));
  EXPECT_TRUE(collins.stopped);
  EXPECT_EQ(collins.sentences.size(), 12u);
  const std::string report = eval::format_evalb(collins);
  EXPECT_NE(report.find("\n  11    2    1  "), std::string::npos);
  EXPECT_EQ(report.find("\n  12 "), std::string::npos);
  EXPECT_EQ(report.find("Summary"), std::string::npos);
  // nk.prm allows 10000.
  const eval::EvalbResult nk = eval::evalb(gold, test, eval::evalb_params("nk"));
  EXPECT_FALSE(nk.stopped);
  EXPECT_EQ(nk.all.error_sentences, 15);
}

TEST(Evalb, ReadsPrmFiles) {
  const eval::EvalbParams p = eval::parse_evalb_params(
      "# a comment\n\nMAX_ERROR 3\nCUTOFF_LEN 20  \nLABELED 0\nDELETE_LABEL TOP\n"
      "DELETE_LABEL_FOR_LENGTH -NONE-\nQUOTE_LABEL POS\nEQ_LABEL ADVP PRT\nEQ_WORD a b\n",
      "x.prm");
  EXPECT_EQ(p.max_error, 3);
  EXPECT_EQ(p.cutoff_len, 20);
  EXPECT_FALSE(p.labeled);
  EXPECT_EQ(p.delete_labels, std::vector<std::string>{"TOP"});
  EXPECT_EQ(p.delete_labels_for_length, std::vector<std::string>{"-NONE-"});
  EXPECT_EQ(p.quote_labels, std::vector<std::string>{"POS"});
  ASSERT_EQ(p.eq_labels.size(), 1u);
  EXPECT_EQ(p.eq_words[0].second, "b");
  EXPECT_EQ(error_of([] { eval::parse_evalb_params("LABELED 1\nCOLOUR red\n", "x.prm"); }),
            "x.prm:2: unknown key 'COLOUR' (DEBUG, MAX_ERROR, CUTOFF_LEN, LABELED, DELETE_LABEL, "
            "DELETE_LABEL_FOR_LENGTH, QUOTE_LABEL, EQ_LABEL, EQ_WORD)");
  EXPECT_EQ(error_of([] { eval::parse_evalb_params("EQ_LABEL ADVP\n", "x.prm"); }),
            "x.prm:1: EQ_LABEL needs two values, not 'ADVP'");
  EXPECT_EQ(error_of([] { eval::parse_evalb_params("CUTOFF_LEN forty\n", "x.prm"); }),
            "x.prm:1: CUTOFF_LEN needs a whole number, not 'forty'");
  EXPECT_EQ(error_of([] { eval::parse_evalb_params("DELETE_LABEL\n", "x.prm"); }),
            "x.prm:1: DELETE_LABEL has no value");
  // nk.prm differs from COLLINS.prm in MAX_ERROR, S1 ? ! deleted, and its quote labels.
  const eval::EvalbParams collins = eval::evalb_params("collins"), nk = eval::evalb_params("nk");
  EXPECT_EQ(collins.max_error, 10);
  EXPECT_EQ(nk.max_error, 10000);
  EXPECT_EQ(collins.delete_labels.size(), 7u);
  EXPECT_EQ(nk.delete_labels.size(), 10u);
  EXPECT_TRUE(collins.quote_labels.empty());
  EXPECT_EQ(nk.quote_labels.size(), 7u);
}

TEST(Evalb, GoldAgainstItselfOnTheSample) {
  const std::filesystem::path dir = ptb_sample_dir();
  if (dir.empty()) {
    GTEST_SKIP()
        << "the PTB sample is not at $TFM_DATA_DIR/ptb-sample or ../shared/data/ptb-sample";
  }
  for (const auto& [file, params] : {std::pair{"wsj_sample.clean.trees.gz", "nk"},
                                     std::pair{"wsj_sample.trees.gz", "collins"}}) {
    SCOPED_TRACE(file);
    const std::vector<Tree> gold = data::read_tree_file(dir / file);
    const eval::EvalbResult result = eval::evalb(gold, gold, eval::evalb_params(params));
    EXPECT_EQ(result.all.sentences, 3914);
    EXPECT_EQ(result.all.error_sentences, 0);
    EXPECT_EQ(result.all.skip_sentences, 0);
    EXPECT_EQ(fmt::format("{:.2f}", result.all.f1()), "100.00");
    EXPECT_EQ(fmt::format("{:.2f}", result.cut.f1()), "100.00");
    EXPECT_EQ(result.all.complete_match, 3914);
  }
}

// --- tfm evalb ---------------------------------------------------------------------------------

std::string quoted(const std::filesystem::path& path) {
  return fmt::format("'{}'", path.string());
}

TEST(CliEvalb, PrintsTheReportAndOneLineErrors) {
  testing::TempDir dir;
  std::string gold_text, test_text;
  for (const Case& c : cases()) {
    gold_text += c.gold + "\n";
    test_text += c.test + "\n";
  }
  testing::write_text(dir / "gold", gold_text);
  testing::write_text(dir / "test", test_text);
  const auto ok =
      testing::run_tfm_command("evalb " + quoted(dir / "gold") + " " + quoted(dir / "test"), dir);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("Bracketing FMeasure       =  86.21\n"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.err, "6 : Length unmatch (2|1)\n");  // evalb's message for the error sentence
  // Gzipped files and --params nk read alike; a .prm file too.
  testing::write_gzip(dir / "gold.gz", gold_text);
  testing::write_text(dir / "x.prm", "DELETE_LABEL TOP\nDELETE_LABEL .\nEQ_LABEL ADVP PRT\n");
  const auto nk = testing::run_tfm_command(
      "evalb " + quoted(dir / "gold.gz") + " " + quoted(dir / "test") + " --params nk", dir);
  EXPECT_EQ(nk.status, 0) << nk.err;
  EXPECT_NE(nk.out.find("-- len<=40 --"), std::string::npos);
  const auto prm = testing::run_tfm_command(
      "evalb " + quoted(dir / "gold") + " " + quoted(dir / "test") + " -p " + quoted(dir / "x.prm"),
      dir);
  EXPECT_EQ(prm.status, 0) << prm.err;

  auto error_line = [&](const std::string& arguments) {
    const auto run = testing::run_tfm_command("evalb " + arguments, dir);
    EXPECT_EQ(run.status, 1) << arguments;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    return run.err;
  };
  EXPECT_EQ(
      error_line(quoted(dir / "missing") + " " + quoted(dir / "test")),
      "tfm: error: cannot open '" + (dir / "missing").string() + "': No such file or directory\n");
  testing::write_text(dir / "short", "(TOP (NN a))\n");
  EXPECT_EQ(error_line(quoted(dir / "gold") + " " + quoted(dir / "short")),
            "tfm: error: gold '" + (dir / "gold").string() + "' has 9 trees but test '" +
                (dir / "short").string() + "' has 1\n");
  testing::write_text(dir / "bad", "(TOP (NN a))\n(TOP (NN a)\n");
  EXPECT_EQ(error_line(quoted(dir / "bad") + " " + quoted(dir / "bad")),
            "tfm: error: " + (dir / "bad").string() +
                ":2:1: unbalanced brackets: this '(' is never closed\n");
  EXPECT_EQ(error_line(quoted(dir / "gold") + " " + quoted(dir / "test") + " --params " +
                       quoted(dir / "nothing.prm")),
            "tfm: error: cannot open '" + (dir / "nothing.prm").string() +
                "': No such file or directory\n");
}

// A directory as the parameter file read as an empty one (F1 69.20, status 0); a tree nested
// 100,000 levels deep crashed evalb (SIGSEGV). Both are one-line errors naming the file.
TEST(CliEvalb, ADirectoryOfParametersAndATreeNestedTooDeepAreErrors) {
  testing::TempDir dir;
  testing::write_text(dir / "gold", kCat + "\n");
  std::filesystem::create_directory(dir / "params");
  auto run = testing::run_tfm_command("evalb " + quoted(dir / "gold") + " " + quoted(dir / "gold") +
                                          " -p " + quoted(dir / "params"),
                                      dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_EQ(run.err,
            "tfm: error: cannot open '" + (dir / "params").string() + "': is a directory\n");

  std::string deep = "(TOP ";
  for (int i = 0; i < 100000; ++i) deep += "(A ";
  testing::write_text(dir / "deep.txt", deep + "(X y)" + std::string(100001, ')') + "\n");
  run = testing::run_tfm_command(
      "evalb " + quoted(dir / "deep.txt") + " " + quoted(dir / "deep.txt"), dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "tfm: error: " + (dir / "deep.txt").string() +
                         ":1:3003: brackets nested more than 1000 levels deep (too deep for a "
                         "parse tree)\n");
}

TEST(CliEvalb, StopsLikeEvalbAfterTooManyErrors) {
  testing::TempDir dir;
  std::string gold, test;
  for (int i = 0; i < 12; ++i) {
    gold += "(TOP (S (NN a) (NN b)))\n";
    test += "(TOP (S (NN a)))\n";
  }
  testing::write_text(dir / "gold", gold);
  testing::write_text(dir / "test", test);
  const auto run =
      testing::run_tfm_command("evalb " + quoted(dir / "gold") + " " + quoted(dir / "test"), dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("tfm: error: evalb stopped at sentence 12: more than MAX_ERROR (10)"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace tfm::internal
