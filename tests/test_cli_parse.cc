// tfm parse and tfm linearise through the built binary. The parser is a tiny random model (without
// the tree constraint its outputs are rarely trees, so most are repaired; with it, the default,
// none is): what is checked is what holds for any model, that every output line is a tree over
// exactly its input line's words, in input order, with empty lines kept; that the constraint
// leaves nothing to repair; that bad input is a one-line error naming the file and line; and that
// parsers and translation models are not mixed up. A lexicalised parser (model.tree_leaves words)
// is trained for a few updates and parses under the same guarantees.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "test_decode_helpers.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/data/vocab.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal {
namespace {

using testing::CommandResult;
using testing::lines_of;
using testing::quoted;
using testing::read_text;
using testing::run_tfm_command;
using testing::TempDir;
using testing::write_text;

const std::vector<std::string> kTrees = {
    "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
    "(TOP (S (NP (PRP He)) (VP (VBD left)) (. .)))",
    "(TOP (NP (NP (DT a) (NN dog)) (, ,) (NP (DT a) (NN mat))))",
};

// dir/parser: a random tiny model with task "parsing" and a word vocabulary of the words and tree
// symbols above; dir/translator: the same weights as a translation model.
struct ParserFixture {
  TempDir dir;
  std::filesystem::path parser = dir / "parser", translator = dir / "translator";
  ParserFixture() {
    std::string words, sequences, gold;
    for (const std::string& text : kTrees) {
      const data::Tree tree = data::parse_tree(text);
      words += fmt::format("{}\n", fmt::join(data::tree_words(tree), " "));
      sequences += data::linearise(tree) + "\n";
    }
    write_text(dir / "train.words", words);
    write_text(dir / "train.sequences", sequences);
    data::VocabTrainOptions options;
    options.inputs = {dir / "train.words", dir / "train.sequences"};
    options.output_prefix = dir / "vocab";
    options.model_type = "word";
    options.vocab_size = 60;
    options.num_threads = 1;
    const data::VocabTrainReport vocab = data::train_vocabulary(options);
    ModelConfig config = testing::tiny_decoder_config();
    config.vocab_size = vocab.vocab_size;
    config.task = "parsing";
    nn::Transformer transformer(config);
    transformer.init(5);
    save_model_dir(parser, config, transformer.named_parameters());
    std::filesystem::copy_file(vocab.model_path, parser / kVocabFileName);
    config.task = "translation";
    save_model_dir(translator, config, transformer.named_parameters());
    std::filesystem::copy_file(vocab.model_path, translator / kVocabFileName);
  }
  CommandResult parse(const std::string& arguments) const {
    return run_tfm_command(
        fmt::format("parse -m {} -b 3 --max-length-offset 12 {}", quoted(parser), arguments), dir);
  }
};

TEST(CliParse, EveryLineBecomesATreeOverItsWordsInOrderAndEmptyLinesStay) {
  ParserFixture f;
  const std::vector<std::string> input = {
      "The cat sat on the mat .", "", "He left .", "a (dog)", "", "mat"};
  write_text(f.dir / "in.txt", fmt::format("{}\n", fmt::join(input, "\n")));
  const CommandResult run = f.parse("-i " + quoted(f.dir / "in.txt"));
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<std::string> output = lines_of(run.out);
  ASSERT_EQ(output.size(), input.size()) << run.out;
  for (size_t i = 0; i < input.size(); ++i) {
    if (input[i].empty()) {
      EXPECT_EQ(output[i], "") << i;
      continue;
    }
    const data::Tree tree = data::parse_tree(output[i]);
    EXPECT_EQ(tree.label, "TOP") << output[i];
    EXPECT_EQ(data::tree_words(tree), data::split_words(input[i])) << output[i];
  }
  // Punctuation gets its treebank tag, other words the placeholder.
  EXPECT_EQ(data::tree_tags(data::parse_tree(output[2])),
            (std::vector<std::string>{"XX", "XX", "."}));
  EXPECT_NE(run.err.find("parsed 6 sentences"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("(tree constraint on); best hypothesis not a tree: 0, repaired (no tree "
                         "in the beam): 0\n"),
            std::string::npos)
      << run.err;

  // The same from standard input, and raw text tokenised first.
  const CommandResult piped =
      run_tfm_command(fmt::format("parse -m {} -b 3 --max-length-offset 12 < {}", quoted(f.parser),
                                  quoted(f.dir / "in.txt")),
                      f.dir);
  EXPECT_EQ(piped.out, run.out);
  write_text(f.dir / "raw.txt", "He left.\n");
  const CommandResult raw = f.parse("--input-format raw -i " + quoted(f.dir / "raw.txt"));
  ASSERT_EQ(raw.status, 0) << raw.err;
  EXPECT_EQ(data::tree_words(data::parse_tree(lines_of(raw.out).at(0))),
            (std::vector<std::string>{"He", "left", "."}));
}

// The model alone (--no-constraints) writes sequences that are not trees, which are repaired into
// trees over the words and counted; the constraint's n-best lists hold trees needing no repair.
TEST(CliParse, WithoutConstraintsTheModelsNonTreesAreRepairedAndCounted) {
  ParserFixture f;
  const std::vector<std::string> input = {"The cat sat on the mat .", "He left .", "a dog , a mat"};
  write_text(f.dir / "in.txt", fmt::format("{}\n", fmt::join(input, "\n")));
  const CommandResult free = f.parse("--no-constraints -i " + quoted(f.dir / "in.txt"));
  ASSERT_EQ(free.status, 0) << free.err;
  const std::vector<std::string> output = lines_of(free.out);
  ASSERT_EQ(output.size(), input.size()) << free.out;
  for (size_t i = 0; i < input.size(); ++i)
    EXPECT_EQ(data::tree_words(data::parse_tree(output[i])), data::split_words(input[i]));
  EXPECT_NE(free.err.find("(tree constraint off)"), std::string::npos) << free.err;
  // This random model's best hypothesis is never a tree over the words (checked: 3 of 3).
  EXPECT_NE(free.err.find("best hypothesis not a tree: 3,"), std::string::npos) << free.err;

  for (const char* constraint : {"", "--no-constraints "}) {
    const CommandResult n_best =
        f.parse(fmt::format("{}--n-best 3 -i {}", constraint, quoted(f.dir / "in.txt")));
    ASSERT_EQ(n_best.status, 0) << n_best.err;
    int64_t repaired = 0;
    for (const std::string& row : lines_of(n_best.out))
      repaired += std::stoll(row.substr(row.rfind(" ||| ") + 5)) > 0;
    if (*constraint == '\0') {
      EXPECT_EQ(lines_of(n_best.out).size(), 9u) << n_best.out;
      EXPECT_EQ(repaired, 0) << n_best.out;
    } else {
      EXPECT_GT(repaired, 0) << n_best.out;
    }
  }
}

TEST(CliParse, TreesGiveTheirWordsAndTagsAndNBestListsEachTree) {
  ParserFixture f;
  write_text(f.dir / "gold.mrg",
             "( (S (NP-SBJ (PRP He)) (VP (VBD left) (-NONE- *T*))\n (. .)) )\n"
             "\n(TOP (NP (DT a) (NN dog)))\n");
  const CommandResult run = f.parse("--input-format trees -i " + quoted(f.dir / "gold.mrg"));
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<std::string> output = lines_of(run.out);
  ASSERT_EQ(output.size(), 2u) << run.out;
  EXPECT_EQ(data::tree_tags(data::parse_tree(output[0])),
            (std::vector<std::string>{"PRP", "VBD", "."}));
  EXPECT_EQ(data::tree_words(data::parse_tree(output[1])), (std::vector<std::string>{"a", "dog"}));

  const CommandResult n_best =
      f.parse("--n-best 3 --input-format trees -i " + quoted(f.dir / "gold.mrg"));
  ASSERT_EQ(n_best.status, 0) << n_best.err;
  const std::vector<std::string> rows = lines_of(n_best.out);
  ASSERT_GE(rows.size(), 2u);
  for (const std::string& row : rows) {
    // "line ||| tree ||| score ||| repairs"
    const size_t a = row.find(" ||| "), b = row.find(" ||| ", a + 5), c = row.find(" ||| ", b + 5);
    ASSERT_NE(c, std::string::npos) << row;
    const std::string line = row.substr(0, a);
    EXPECT_TRUE(line == "0" || line == "1") << row;
    const data::Tree tree = data::parse_tree(row.substr(a + 5, b - a - 5));
    EXPECT_EQ(data::tree_words(tree).size(), line == "0" ? 3u : 2u) << row;
  }
}

TEST(CliParse, BadInputIsAOneLineErrorNamingTheFileAndLine) {
  ParserFixture f;
  write_text(f.dir / "bad.trees", "(TOP (NP (DT a) (NN dog)))\n(TOP (NP (DT a) (NN dog))\n");
  CommandResult run = f.parse("--input-format trees -i " + quoted(f.dir / "bad.trees"));
  EXPECT_EQ(run.status, 1);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("bad.trees:2:1: unbalanced brackets"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;

  write_text(f.dir / "bad.txt", "fine\nnot \xff utf-8\n");
  run = f.parse("-i " + quoted(f.dir / "bad.txt"));
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("bad.txt' line 2 is not valid UTF-8"), std::string::npos) << run.err;

  run = f.parse("-i " + quoted(f.dir / "missing.txt"));
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("missing.txt"), std::string::npos) << run.err;

  // A sentence longer than the model accepts (max_positions 64) names its line.
  std::string long_line;
  for (int i = 0; i < 70; ++i) long_line += "cat ";
  write_text(f.dir / "long.txt", "cat\n" + long_line + "\n");
  run = f.parse("-i " + quoted(f.dir / "long.txt"));
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("long.txt: sentence 2: 70 source tokens"), std::string::npos) << run.err;

  run = f.parse("--n-best 4 -i " + quoted(f.dir / "long.txt"));
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("--n-best 4 exceeds the beam size 3"), std::string::npos) << run.err;
}

// A tree nested 100,000 levels deep crashed the reader (SIGSEGV); now it is the reader's one-line
// error at the bracket too deep, for parse's trees input and linearise's (gzipped) input alike.
std::string deep_tree() {
  std::string text = "(TOP ";
  for (int i = 0; i < 100000; ++i) text += "(A ";
  return text + "(X y)" + std::string(100001, ')') + "\n";
}

TEST(CliParse, ATreeNestedTooDeepIsAOneLineError) {
  ParserFixture f;
  write_text(f.dir / "deep.trees", "(TOP (NP (DT a) (NN dog)))\n" + deep_tree());
  const CommandResult run = f.parse("--input-format trees -i " + quoted(f.dir / "deep.trees"));
  EXPECT_EQ(run.status, 1);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("deep.trees:2:3003: brackets nested more than 1000 levels deep"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST(CliParse, ParsersAndTranslationModelsAreNotMixedUp) {
  ParserFixture f;
  write_text(f.dir / "in.txt", "He left .\n");
  CommandResult run = run_tfm_command(
      fmt::format("parse -m {} -i {}", quoted(f.translator), quoted(f.dir / "in.txt")), f.dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("a translation model (config.json task \"translation\"); tfm parse needs"),
            std::string::npos)
      << run.err;
  run = run_tfm_command(
      fmt::format("translate -m {} -i {}", quoted(f.parser), quoted(f.dir / "in.txt")), f.dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_NE(run.err.find("a parsing model (config.json task \"parsing\"); use tfm parse"),
            std::string::npos)
      << run.err;
}

// The lexicalised scheme end to end: tfm linearise --leaves words writes each word in place of XX,
// a tiny parser trains on it with model.tree_leaves=words (config.json keeps the key; validation
// reports its F1), and tfm parse writes trees over exactly the input's words (an unknown word
// too), under the constraint with nothing repaired; without it, trees over the words as well.
TEST(CliParse, ALexicalisedParserTrainsAndParsesTreesOverTheInputsWords) {
  TempDir dir;
  std::string trees;
  for (const std::string& tree : kTrees) trees += tree + "\n";
  write_text(dir / "trees.txt", trees);
  const CommandResult linearised =
      run_tfm_command(fmt::format("linearise -i {} --leaves words --words {} --sequences {}",
                                  quoted(dir / "trees.txt"), quoted(dir / "w"), quoted(dir / "s")),
                      dir);
  ASSERT_EQ(linearised.status, 0) << linearised.err;
  EXPECT_EQ(read_text(dir / "s"),
            "(S (NP The cat )NP (VP sat (PP on (NP the mat )NP )PP )VP . )S\n"
            "(S (NP He )NP (VP left )VP . )S\n"
            "(NP (NP a dog )NP , (NP a mat )NP )NP\n");
  write_text(dir / "recipe.yaml",
             fmt::format("model:\n  layers: 1\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  d_k: 8\n"
                         "  d_v: 8\n  max_positions: 128\n  task: parsing\n"
                         "data:\n  train_source: {0}\n  train_target: {1}\n  valid_source: {0}\n"
                         "  valid_target: {1}\n  vocab_size: 40\n  vocab_type: word\n"
                         "  max_tokens: 400\noptimizer:\n  warmup: 10\n"
                         "training:\n  log_every: 2\n  threads: 1\n  run_dir: {2}\n"
                         "checkpoints:\n  every_steps: 2\n  keep: 3\n"
                         "validation:\n  every_steps: 4\n",
                         (dir / "w").string(), (dir / "s").string(), (dir / "run").string()));
  const CommandResult trained =
      run_tfm_command(fmt::format("train -c {} --max-steps 4 --set model.tree_leaves=words",
                                  quoted(dir / "recipe.yaml")),
                      dir);
  ASSERT_EQ(trained.status, 0) << trained.err;
  EXPECT_NE(trained.err.find("F1"), std::string::npos) << trained.err;
  const CommandResult averaged =
      run_tfm_command(fmt::format("average -c {} -n 2 -o {}", quoted(dir / "run" / "checkpoints"),
                                  quoted(dir / "parser")),
                      dir);
  ASSERT_EQ(averaged.status, 0) << averaged.err;
  EXPECT_NE(read_text(dir / "parser" / kConfigFileName).find("\"tree_leaves\": \"words\""),
            std::string::npos);

  const std::vector<std::string> input = {"The cat sat on the mat .", "He left .", "a dog , a mat",
                                          "zebra cat"};
  write_text(dir / "in.txt", fmt::format("{}\n", fmt::join(input, "\n")));
  for (const char* constraint : {"", "--no-constraints "}) {
    const CommandResult run =
        run_tfm_command(fmt::format("parse -m {} -b 3 --max-length-offset 12 {}-i {}",
                                    quoted(dir / "parser"), constraint, quoted(dir / "in.txt")),
                        dir);
    ASSERT_EQ(run.status, 0) << run.err;
    const std::vector<std::string> output = lines_of(run.out);
    ASSERT_EQ(output.size(), input.size()) << run.out;
    for (size_t i = 0; i < input.size(); ++i)
      EXPECT_EQ(data::tree_words(data::parse_tree(output[i])), data::split_words(input[i]))
          << output[i];
    if (*constraint == '\0') {
      EXPECT_NE(run.err.find("(tree constraint on); best hypothesis not a tree: 0, repaired (no "
                             "tree in the beam): 0\n"),
                std::string::npos)
          << run.err;
    }
  }
}

TEST(CliLinearise, WritesWordsSequencesAndGoldTreesOfARange) {
  TempDir dir;
  std::string text;
  for (const std::string& tree : kTrees) text += tree + "\n";
  write_text(dir / "trees.txt", "( (S (NP-SBJ (PRP It)) (VP (VBZ works) (-NONE- *))) )\n" + text);
  const CommandResult run = run_tfm_command(
      fmt::format("linearise -i {} --range 1-2 --words {} --sequences {} --trees {}",
                  quoted(dir / "trees.txt"), quoted(dir / "w"), quoted(dir / "s"),
                  quoted(dir / "g")),
      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(read_text(dir / "w"), "It works\nThe cat sat on the mat .\n");
  EXPECT_EQ(read_text(dir / "s"),
            "(S (NP XX )NP (VP XX )VP )S\n"
            "(S (NP XX XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP XX )S\n");
  EXPECT_EQ(read_text(dir / "g"), "(TOP (S (NP (PRP It)) (VP (VBZ works))))\n" + kTrees[0] + "\n");

  const CommandResult bad =
      run_tfm_command(fmt::format("linearise -i {} --range 3-9 --words {} --sequences {}",
                                  quoted(dir / "trees.txt"), quoted(dir / "w"), quoted(dir / "s")),
                      dir);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("has only 4 trees"), std::string::npos) << bad.err;
}

TEST(CliLinearise, AGzippedTreeNestedTooDeepIsAOneLineError) {
  TempDir dir;
  testing::write_gzip(dir / "deep.gz", deep_tree());
  const CommandResult run =
      run_tfm_command(fmt::format("linearise -i {} --words {} --sequences {}",
                                  quoted(dir / "deep.gz"), quoted(dir / "w"), quoted(dir / "s")),
                      dir);
  EXPECT_EQ(run.status, 1);
  EXPECT_EQ(run.err, "tfm: error: " + (dir / "deep.gz").string() +
                         ":1:3003: brackets nested more than 1000 levels deep (too deep for a "
                         "parse tree)\n");
}

}  // namespace
}  // namespace tfm::internal
