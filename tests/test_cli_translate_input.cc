// tfm translate on bad input, through the built binary: every problem is a one-line error (exit 1,
// or CLI11's usage error) naming the file and line, or a warning naming the line; nothing is
// silent. The model is a tiny random one with a vocabulary trained on generated text.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "test_decode_helpers.h"
#include "text_model_test_util.h"
#include "tfm/model/model_dir.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/device.h"

namespace tfm::internal {
namespace {

using testing::CommandResult;
using testing::run_tfm_command;
using testing::TempDir;

std::string quoted(const std::filesystem::path& p) {
  return fmt::format("'{}'", p.string());
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// dir/model: a random tiny model (max_positions 64) and its 120-piece vocabulary.
struct ModelFixture {
  TempDir dir;
  std::filesystem::path model = testing::write_tiny_text_model(dir);
  CommandResult translate(const std::string& arguments) const {
    return run_tfm_command(fmt::format("translate -m {} -b 1 {}", quoted(model), arguments), dir);
  }
  void expect_failure(const std::string& arguments,
                      std::initializer_list<std::string> parts) const {
    const CommandResult run = translate(arguments);
    EXPECT_NE(run.status, 0) << arguments;
    EXPECT_EQ(count_lines(run.err), 1) << arguments << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << arguments << ": " << run.out;
    for (const std::string& part : parts)
      EXPECT_NE(run.err.find(part), std::string::npos) << arguments << ": " << run.err;
  }
};

TEST(CliTranslateInput, ATruncatedGzipInputIsAnError) {
  ModelFixture f;
  testing::write_gzip(f.dir / "in.gz",
                      testing::joined_lines(testing::generated_sentences(100, false, 7)));
  const std::string bytes = testing::read_text(f.dir / "in.gz");
  testing::write_text(f.dir / "cut.gz", bytes.substr(0, bytes.size() * 3 / 10));
  const CommandResult run = f.translate("-i " + quoted(f.dir / "cut.gz"));
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("tfm: error: '" + (f.dir / "cut.gz").string() +
                         "': the gzip stream ends early after line"),
            std::string::npos)
      << run.err;
  EXPECT_TRUE(run.out.empty());
}

TEST(CliTranslateInput, ConfigTokenIdsMustMatchTheVocabulary) {
  ModelFixture f;
  const auto config_path = f.model / kConfigFileName;
  nlohmann::json config = nlohmann::json::parse(testing::read_text(config_path));
  config["bos_id"] = 3;
  config["eos_id"] = 2;
  testing::write_text(config_path, config.dump(2));
  f.expect_failure("-i /dev/null", {config_path.string() + ": bos_id 3 but ",
                                    (f.model / kVocabFileName).string() + " has bos id 2 (<s>)"});
  config["bos_id"] = 2;
  config["eos_id"] = 3;
  testing::write_text(config_path, config.dump(2));
  EXPECT_EQ(f.translate("-i /dev/null").status, 0);
  // A vocabulary of another size than the model's.
  std::filesystem::copy_file(testing::train_tiny_vocab(f.dir, 100), f.model / kVocabFileName,
                             std::filesystem::copy_options::overwrite_existing);
  f.expect_failure("-i /dev/null", {config_path.string() + ": vocab_size 120 but ", "100 pieces"});
  // A number beyond double in config.json: an error naming the file, not an internal error.
  testing::write_text(config_path, R"({"layers": 2, "d_model": 1e400})");
  const CommandResult overflow = f.translate("-i /dev/null");
  EXPECT_EQ(overflow.status, 1) << overflow.err;
  EXPECT_NE(overflow.err.find(config_path.string() + ": not valid JSON"), std::string::npos)
      << overflow.err;
  testing::write_text(config_path, R"({"layers": 123456789012345678901234567890})");
  const CommandResult huge = f.translate("-i /dev/null");
  EXPECT_EQ(huge.status, 1) << huge.err;
  EXPECT_NE(huge.err.find(config_path.string() + ": configuration key 'layers'"), std::string::npos)
      << huge.err;
}

// model.safetensors records the CRC-32 of the vocab.model it was saved with: another model's
// vocabulary of the same size (here unigram for BPE) translated garbage with exit 0.
// Two 100-piece vocabularies of the same text (BPE and unigram) and tiny random models written with
// either.
struct TwoVocabularies {
  TempDir dir;
  std::filesystem::path bpe = testing::train_tiny_vocab(dir, 100, "bpe");
  std::filesystem::path unigram = testing::train_tiny_vocab(dir, 100, "unigram");
  std::filesystem::path write_model(const char* name, uint64_t seed,
                                    const std::filesystem::path& vocab) const {
    ModelConfig config = testing::tiny_decoder_config();
    config.vocab_size = 100;
    nn::Transformer transformer(config);
    transformer.init(seed);
    save_model_dir(dir / name, config, transformer.named_parameters(), testing::read_text(vocab));
    return dir / name;
  }
};

TEST(CliTranslateInput, AVocabularyOtherThanTheModelsIsRefused) {
  const TwoVocabularies vocabularies;
  const TempDir& dir = vocabularies.dir;
  const auto& unigram = vocabularies.unigram;
  const auto model = vocabularies.write_model("model", 3, vocabularies.bpe);
  testing::write_text(dir / "in.txt", "a small house .\n");
  const std::string command =
      fmt::format("translate -m {} -b 1 -i {}", quoted(model), quoted(dir / "in.txt"));
  const CommandResult good = run_tfm_command(command, dir);
  ASSERT_EQ(good.status, 0) << good.err;
  EXPECT_EQ(count_lines(good.out), 1);

  std::filesystem::copy_file(unigram, model / kVocabFileName,
                             std::filesystem::copy_options::overwrite_existing);
  const CommandResult mixed = run_tfm_command(command, dir);
  EXPECT_EQ(mixed.status, 1) << mixed.err;
  EXPECT_EQ(count_lines(mixed.err), 1) << mixed.err;
  EXPECT_TRUE(mixed.out.empty()) << mixed.out;
  for (const std::string& part :
       {(model / kVocabFileName).string() + " (crc32 ",
        "is not the vocabulary that " + (model / kWeightsFileName).string() + " was written with",
        std::string("mixes two models' files")})
    EXPECT_NE(mixed.err.find(part), std::string::npos) << mixed.err;
}

// -m A -m B: an ensemble. A model twice translates as the model alone (the mean of equal
// probabilities); two models need one vocabulary, else a one-line error naming both files.
TEST(CliTranslateInput, AnEnsembleNeedsOneVocabulary) {
  const TwoVocabularies vocabularies;
  const TempDir& dir = vocabularies.dir;
  const auto a = vocabularies.write_model("a", 3, vocabularies.bpe);
  const auto b = vocabularies.write_model("b", 4, vocabularies.bpe);
  const auto c = vocabularies.write_model("c", 5, vocabularies.unigram);
  testing::write_text(dir / "in.txt", "a small house .\nthe dog runs .\n");
  const auto translate = [&](const std::string& models) {
    return run_tfm_command(fmt::format("translate {} -b 2 -i {}", models, quoted(dir / "in.txt")),
                           dir);
  };
  const CommandResult alone = translate("-m " + quoted(a));
  const CommandResult twice = translate(fmt::format("-m {} -m {}", quoted(a), quoted(a)));
  const CommandResult pair = translate(fmt::format("-m {} -m {}", quoted(a), quoted(b)));
  ASSERT_EQ(alone.status, 0) << alone.err;
  ASSERT_EQ(twice.status, 0) << twice.err;
  ASSERT_EQ(pair.status, 0) << pair.err;
  EXPECT_EQ(count_lines(alone.out), 2);
  EXPECT_EQ(twice.out, alone.out);
  EXPECT_EQ(count_lines(pair.out), 2);

  const CommandResult mixed = translate(fmt::format("-m {} -m {}", quoted(a), quoted(c)));
  EXPECT_EQ(mixed.status, 1) << mixed.err;
  EXPECT_EQ(count_lines(mixed.err), 1) << mixed.err;
  EXPECT_TRUE(mixed.out.empty()) << mixed.out;
  for (const std::string& part :
       {(c / kVocabFileName).string() + ": not the vocabulary of " + (a / kVocabFileName).string(),
        std::string("one vocabulary")})
    EXPECT_NE(mixed.err.find(part), std::string::npos) << mixed.err;
  const CommandResult probed =
      translate(fmt::format("-m {} -m {} --alignment", quoted(a), quoted(b)));
  EXPECT_EQ(probed.status, 1) << probed.err;
  EXPECT_NE(probed.err.find("not an ensemble's of 2"), std::string::npos) << probed.err;
}

// zlib alone ignores bytes after the gzip data; tfm refuses them, naming the file.
TEST(CliTranslateInput, TrailingGarbageAfterGzipInputIsAnError) {
  ModelFixture f;
  testing::write_gzip(f.dir / "in.gz", "a small house .\n");
  testing::write_text(f.dir / "junk.gz", testing::read_text(f.dir / "in.gz") + "junk\n");
  f.expect_failure(
      "-i " + quoted(f.dir / "junk.gz"),
      {"'" + (f.dir / "junk.gz").string() + "': the bytes after the end of the gzip data",
       "trailing garbage"});
  // Two gzip members (cat a.gz b.gz) are one input of two lines.
  testing::write_text(f.dir / "two.gz",
                      testing::read_text(f.dir / "in.gz") + testing::read_text(f.dir / "in.gz"));
  const CommandResult two = f.translate("-i " + quoted(f.dir / "two.gz"));
  EXPECT_EQ(two.status, 0) << two.err;
  EXPECT_EQ(count_lines(two.out), 2);
}

TEST(CliTranslateInput, LongInputsAreTruncatedWithAWarningOrRejected) {
  ModelFixture f;
  // A 100,000-character line (many thousands of tokens) between two short ones.
  std::string words;
  while (words.size() < 100000) words += "der hund läuft ";
  testing::write_text(f.dir / "in.txt", "the dog\n" + words + "\na man\n");
  const std::string input = quoted(f.dir / "in.txt");
  const CommandResult run = f.translate("-i " + input);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(count_lines(run.out), 3) << run.out;
  EXPECT_NE(run.err.find("tfm: warning: " + (f.dir / "in.txt").string() + ":2: "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("subword tokens, truncated to 64"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("translated 3 sentences"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("1 truncated"), std::string::npos) << run.err;

  const CommandResult shorter = f.translate("--max-input-length 2 -i " + input);
  ASSERT_EQ(shorter.status, 0) << shorter.err;
  EXPECT_NE(shorter.err.find(":2: "), std::string::npos) << shorter.err;
  EXPECT_NE(shorter.err.find("truncated to 2"), std::string::npos) << shorter.err;

  f.expect_failure("--reject-long-inputs -i " + input,
                   {(f.dir / "in.txt").string() + ":2: ", "more than the maximum input length 64"});
  f.expect_failure("--max-input-length -1 -i " + input, {"--max-input-length"});
}

TEST(CliTranslateInput, ClosedStandardInputIsAnError) {
  ModelFixture f;
  f.expect_failure("<&-", {"standard input is closed"});
  // An empty standard input is fine: no output, and the summary line.
  const CommandResult empty = f.translate("< /dev/null");
  EXPECT_EQ(empty.status, 0) << empty.err;
  EXPECT_TRUE(empty.out.empty());
  EXPECT_NE(empty.err.find("translated 0 sentences"), std::string::npos) << empty.err;
}

TEST(CliTranslateInput, NegativeCountsAreUsageErrors) {
  ModelFixture f;
  testing::write_text(f.dir / "in.txt", "the dog\n");
  const std::string input = "-i " + quoted(f.dir / "in.txt");
  const std::string attention = " --attention-output " + quoted(f.dir / "att.jsonl");
  f.expect_failure(input + attention + " --attention-layer 0 --attention-head -2",
                   {"--attention-head"});
  f.expect_failure(input + attention + " --attention-layer -1", {"--attention-layer"});
  f.expect_failure(input + " --attention-head 1", {"--attention-head", "--attention-output"});
  f.expect_failure(input + " --threads -3", {"--threads"});
  f.expect_failure(input + " --alpha -1", {"--alpha"});
  f.expect_failure(input + " --max-length-offset 0", {"--max-length-offset"});
  // The other subcommands.
  for (const char* arguments :
       {"info --source-length -5", "info --length 0", "info --vocab -1",
        "vocab -i x -o y --threads -1", "corpus --src a --tgt b --vocab v --max-length -1",
        "corpus --src a --tgt b --vocab v --seed -1"}) {
    const CommandResult run = run_tfm_command(arguments, f.dir);
    EXPECT_NE(run.status, 0) << arguments;
    EXPECT_EQ(run.err.find("does not exist"), std::string::npos)
        << "not a usage error: " << run.err;
    EXPECT_EQ(count_lines(run.err), 1) << arguments << ": " << run.err;
  }
}

TEST(CliTranslateInput, OutputErrorsGiveTheReasonAndASummaryIsAlwaysPrinted) {
  ModelFixture f;
  testing::write_text(f.dir / "in.txt", "the dog\na man\n");
  const std::string input = "-i " + quoted(f.dir / "in.txt");
  f.expect_failure(input + " -o " + quoted(f.dir / "missing" / "out.txt"),
                   {"out.txt: cannot open for writing: No such file or directory"});
  f.expect_failure(input + " -o " + quoted(f.dir.path()),
                   {"cannot open for writing: Is a directory"});
  f.expect_failure(
      input + " --attention-layer 0 --attention-output " + quoted(f.dir / "missing" / "att.jsonl"),
      {"att.jsonl: cannot open for writing: No such file or directory"});
  // Two sentences: the summary line on stderr, stdout holds the translations only.
  const CommandResult run = f.translate(input);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(count_lines(run.out), 2) << run.out;
  EXPECT_EQ(count_lines(run.err), 1) << run.err;
  EXPECT_EQ(run.err.rfind("translated 2 sentences in ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("sentences/s"), std::string::npos) << run.err;
}

// --device cuda: without a usable GPU, a one-line error that says why and no output; with one, the
// CPU's translations.
TEST(CliTranslateInput, DeviceCudaTranslatesAsTheCpuOrSaysWhyNot) {
  ModelFixture f;
  testing::write_text(f.dir / "in.txt", "a b c\nd e\n");
  const std::string input = "-i " + quoted(f.dir / "in.txt");
  const std::string why = ops::device_unavailable_reason(Device::cuda);
  if (!why.empty()) {
    f.expect_failure(input + " --device cuda", {why});
    return;
  }
  const CommandResult cpu = f.translate(input + " --device cpu");
  const CommandResult gpu = f.translate(input + " --device cuda");
  EXPECT_EQ(cpu.status, 0) << cpu.err;
  EXPECT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_EQ(count_lines(gpu.out), 2);
  EXPECT_EQ(gpu.out, cpu.out);
}

TEST(CliTranslateInput, AnUnknownDeviceIsAUsageError) {
  ModelFixture f;
  const CommandResult run = f.translate("--device tpu");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find("--device"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace tfm::internal
