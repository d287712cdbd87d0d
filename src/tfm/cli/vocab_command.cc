// tfm vocab: learns the SentencePiece vocabulary shared by source and target (BPE as in the paper,
// or unigram) from plain or gzipped text, with the special ids the model expects.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/data/vocab.h"

namespace tfm::internal::cli {

namespace {

struct VocabCommandOptions {
  std::vector<std::string> inputs;
  std::string output_prefix;
  data::VocabTrainOptions train;
};

void run_vocab(const VocabCommandOptions& options) {
  data::VocabTrainOptions train = options.train;
  train.inputs.assign(options.inputs.begin(), options.inputs.end());
  train.output_prefix = options.output_prefix;
  const data::VocabTrainReport report = data::train_vocabulary(train, [](const std::string& line) {
    std::printf("tfm vocab: %s\n", line.c_str());
    std::fflush(stdout);
  });
  std::printf(
      "tfm vocab: wrote %s and %s: %lld pieces (%s; pad 0 %s, unk 1 %s, bos 2 %s, eos 3 %s) "
      "from %lld sentences in %.1f s\n",
      report.model_path.c_str(), report.vocab_path.c_str(),
      static_cast<long long>(report.vocab_size), train.model_type.c_str(),
      std::string(data::kPadPiece).c_str(), std::string(data::kUnkPiece).c_str(),
      std::string(data::kBosPiece).c_str(), std::string(data::kEosPiece).c_str(),
      static_cast<long long>(report.sentences), report.seconds);
}

}  // namespace

void register_vocab(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "vocab",
      "Learn a SentencePiece vocabulary shared by source and target (writes .model, .vocab)");
  auto options = std::make_shared<VocabCommandOptions>();
  data::VocabTrainOptions& t = options->train;
  cmd->add_option("-i,--input", options->inputs,
                  "Training text, one sentence a line, plain or .gz (repeat or list several)")
      ->required();
  cmd->add_option("-o,--out", options->output_prefix,
                  "Output prefix: writes <prefix>.model and <prefix>.vocab")
      ->required();
  cmd->add_option("--type", t.model_type,
                  "Model type: bpe (the paper's), unigram, or word (whole words, at most --size)")
      ->check(CLI::IsMember({"bpe", "unigram", "word"}))
      ->default_str("bpe");
  cmd->add_option("--size", t.vocab_size,
                  "Vocabulary size, special symbols included (the paper: 37000 for English-German)")
      ->default_str("37000");
  cmd->add_option("--character-coverage", t.character_coverage,
                  "Share of characters covered by the vocabulary; the rest map to <unk>")
      ->default_str("1.0");
  cmd->add_option("--sample", t.input_sentence_size,
                  "Train on this many sentences sampled from the inputs (0: all)")
      ->default_str("0");
  cmd->add_option("--seed", t.seed, "Seed of the sampling (and of unigram training)")
      ->default_str("1");
  cmd->add_option("--threads", t.num_threads, "Training threads (0: all cores)")
      ->check(CLI::Range(0, 4096))
      ->default_str("0");
  cmd->add_flag("--verbose", t.verbose, "Show SentencePiece's own log");
  cmd->callback([options] { run_vocab(*options); });
}

}  // namespace tfm::internal::cli
