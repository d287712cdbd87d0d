// What tfm translate and tfm parse write, through the built binary: a failed write (a full disk)
// names its reason and leaves the old output file as it was; a model that overflows is an error,
// never empty lines; word alignments stay within the source's words; a beam wider than the
// vocabulary allows works.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "data_test_util.h"
#include "file_size_limit_test_util.h"
#include "test_decode_helpers.h"
#include "text_model_test_util.h"
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
using testing::run_tfm_command;
using testing::TempDir;

// The input of the full-disk tests: enough lines that their translations pass the limit.
const std::string kOldOutput = "the old output\n";
constexpr rlim_t kLimit = 2000;

std::string many_lines() {
  return testing::joined_lines(testing::generated_sentences(1000, false, 11));
}

TEST(CliDecodeOutput, TranslateOnAFullDiskNamesTheReasonAndKeepsTheOldFile) {
  TempDir dir;
  const std::filesystem::path model = testing::write_tiny_text_model(dir);
  testing::write_text(dir / "in.txt", many_lines());
  testing::write_text(dir / "out.txt", kOldOutput);
  const CommandResult run = testing::run_tfm_with_file_limit(
      {"translate", "-m", model.string(), "-b", "1", "--max-length-offset", "8", "-i",
       (dir / "in.txt").string(), "-o", (dir / "out.txt").string()},
      kLimit, dir);
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(
      run.err.find("tfm: error: " + (dir / "out.txt").string() + ": write failed: File too large"),
      std::string::npos)
      << run.err;
  // Before: out.txt cut at the limit, its old content gone.
  EXPECT_EQ(testing::read_text(dir / "out.txt"), kOldOutput);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename().string().find("out.txt.tmp"), std::string::npos)
        << "a temporary file is left: " << entry.path();

  // Without the limit the file is replaced by the translations, one line a line.
  const CommandResult ok =
      run_tfm_command(fmt::format("translate -m {} -b 1 --max-length-offset 8 -i {} -o {}",
                                  quoted(model), quoted(dir / "in.txt"), quoted(dir / "out.txt")),
                      dir);
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(lines_of(testing::read_text(dir / "out.txt")).size(), 1000u);

  // Standard output that cannot be written names the reason too.
  const CommandResult full = testing::run_tfm_with_file_limit(
      {"translate", "-m", model.string(), "-b", "1", "-i", (dir / "in.txt").string()},
      RLIM_INFINITY, dir, "/dev/full");
  EXPECT_EQ(full.status, 1) << full.err;
  EXPECT_NE(full.err.find("<stdout>: write failed: No space left on device"), std::string::npos)
      << full.err;
}

// A word-level parser (task parsing) over a vocabulary smaller than twice the default beam (21).
std::filesystem::path write_small_parser(const TempDir& dir) {
  const std::vector<std::string> trees = {
      "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))",
      "(TOP (S (NP (PRP He)) (VP (VBD left)) (. .)))"};
  std::string words, sequences;
  for (const std::string& text : trees) {
    const data::Tree tree = data::parse_tree(text);
    words += fmt::format("{}\n", fmt::join(data::tree_words(tree), " "));
    sequences += data::linearise(tree) + "\n";
  }
  testing::write_text(dir / "train.words", words);
  testing::write_text(dir / "train.sequences", sequences);
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
  const std::filesystem::path parser = dir / "parser";
  save_model_dir(parser, config, transformer.named_parameters());
  std::filesystem::copy_file(vocab.model_path, parser / kVocabFileName);
  return parser;
}

TEST(CliDecodeOutput, ParseWithTheDefaultBeamOnASmallVocabularyAndAFullDisk) {
  TempDir dir;
  const std::filesystem::path parser = write_small_parser(dir);
  ASSERT_LT(load_config(parser / kConfigFileName).vocab_size, 42);
  std::string input;
  for (int i = 0; i < 40; ++i) input += "The cat sat on the mat .\nHe left .\n";
  testing::write_text(dir / "in.txt", input);
  testing::write_text(dir / "out.txt", kOldOutput);
  // The default beam, 21: 42 candidates a row from fewer tokens ("m 42 must be in [1, vocab").
  const std::vector<std::string> arguments = {"parse",
                                              "-m",
                                              parser.string(),
                                              "--max-length-offset",
                                              "12",
                                              "-i",
                                              (dir / "in.txt").string(),
                                              "-o",
                                              (dir / "out.txt").string()};
  const CommandResult cut = testing::run_tfm_with_file_limit(arguments, kLimit, dir);
  EXPECT_EQ(cut.status, 1) << cut.err;
  EXPECT_NE(cut.err.find((dir / "out.txt").string() + ": write failed: File too large"),
            std::string::npos)
      << cut.err;
  EXPECT_EQ(testing::read_text(dir / "out.txt"), kOldOutput);

  const CommandResult run = testing::run_tfm_with_file_limit(arguments, RLIM_INFINITY, dir);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<std::string> trees = lines_of(testing::read_text(dir / "out.txt"));
  ASSERT_EQ(trees.size(), 80u);
  EXPECT_EQ(data::tree_words(data::parse_tree(trees[1])),
            (std::vector<std::string>{"He", "left", "."}));
}

// Weights x 1e30: the activations overflow. Every line used to come out empty with exit 0 (and
// --n-best-output wrote no line at all); now it is an error naming the decoding step, greedy and
// beam, f32 and int8.
TEST(CliDecodeOutput, AnOverflowingModelIsAnErrorNotEmptyLines) {
  TempDir dir;
  const std::filesystem::path vocab = testing::train_tiny_vocab(dir);
  ModelConfig config = testing::tiny_decoder_config();
  config.vocab_size = 120;
  nn::Transformer transformer(config);
  transformer.init(3);
  for (const Tensor& p : transformer.parameters()) {
    float* x = p.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) x[i] *= 1e30f;
  }
  const std::filesystem::path model = dir / "model";
  save_model_dir(model, config, transformer.named_parameters());
  std::filesystem::copy_file(vocab, model / kVocabFileName);
  testing::write_text(dir / "in.txt", "the dog\na man\n");
  for (const char* options :
       {"-b 1", "-b 4", "-b 4 --n-best 2 --n-best-output", "-b 1 --precision int8"}) {
    const CommandResult run = run_tfm_command(
        fmt::format("translate -m {} {} -i {}", quoted(model), options, quoted(dir / "in.txt")),
        dir);
    EXPECT_EQ(run.status, 1) << options << ": " << run.err;
    EXPECT_NE(run.err.find("tfm: error: decoding step 1: the model's log-probabilities are not "
                           "finite"),
              std::string::npos)
        << options << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << options << ": " << run.out;
  }
}

// Pharaoh pairs "i-j" of a translation's alignment field (after " ||| ").
std::vector<int64_t> source_indices(const std::string& line) {
  const size_t bar = line.rfind(" ||| ");
  EXPECT_NE(bar, std::string::npos) << line;
  std::istringstream pairs(line.substr(bar + 5));
  std::vector<int64_t> out;
  for (std::string pair; pairs >> pair;) out.push_back(std::stoll(pair.substr(0, pair.find('-'))));
  return out;
}

// A character the vocabulary lacks ("á", a NUL) inside a word was a word of its own, and the
// alignment named source words past the end ("8-0" for 7 words).
TEST(CliDecodeOutput, AlignmentsStayWithinTheSourceWordsWhateverTheirCharacters) {
  TempDir dir;
  const std::filesystem::path model = testing::write_tiny_text_model(dir);
  const std::vector<std::string> input = {"a man runs in the park .", "a mán runs in the park .",
                                          std::string("a m\0n runs in the park .", 24),
                                          "á man runs in the park ñ"};
  testing::write_text(dir / "in.txt", testing::joined_lines(input));
  const CommandResult run = run_tfm_command(
      fmt::format("translate -m {} -b 1 --alignment -i {}", quoted(model), quoted(dir / "in.txt")),
      dir);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::vector<std::string> output = lines_of(run.out);
  ASSERT_EQ(output.size(), input.size()) << run.out;
  for (const std::string& line : output) {
    const std::vector<int64_t> sources = source_indices(line);
    EXPECT_FALSE(sources.empty()) << line;
    for (int64_t s : sources) EXPECT_LT(s, 7) << line;
  }
}

}  // namespace
}  // namespace tfm::internal
