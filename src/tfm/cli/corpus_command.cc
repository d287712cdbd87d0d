// tfm corpus: checks and encodes a parallel corpus (warming the cache a training run will use) and
// shows what token-budget batching makes of it.
#include <cstdio>
#include <memory>
#include <string>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/data/batcher.h"
#include "tfm/data/corpus.h"
#include "tfm/data/vocab.h"

namespace tfm::internal::cli {

namespace {

struct CorpusCommandOptions {
  std::string source;
  std::string target;
  std::string vocab;
  std::string cache_dir;
  data::CorpusOptions corpus;
  data::BatcherOptions batcher;
  uint64_t seed = 1;
  bool whole_sentences = false;
};

void run_corpus(const CorpusCommandOptions& options) {
  const data::Vocabulary vocab(options.vocab);
  data::CorpusOptions corpus_options = options.corpus;
  corpus_options.cache_dir = options.cache_dir;
  corpus_options.word_memo = !options.whole_sentences;
  corpus_options.progress = [](const std::string& line) {
    std::fprintf(stderr, "tfm corpus: %s\n", line.c_str());
  };
  const data::Corpus corpus =
      data::Corpus::load(options.source, options.target, vocab, corpus_options);
  std::printf("corpus: %s\n", corpus.stats().summary().c_str());

  const data::Batcher batcher(corpus, options.batcher, options.seed);
  const data::PlanSummary plan = data::summarize_plan(corpus, batcher.plan());
  const auto batches = static_cast<double>(plan.batches);
  std::printf(
      "batches (epoch 0, budget %lld padded tokens): %lld batches, %.1f pairs and %.0f padded "
      "tokens each on average, largest %lld; real tokens %.1f%% of padded; %lld pairs skipped "
      "as larger than the budget\n",
      static_cast<long long>(options.batcher.max_tokens), static_cast<long long>(plan.batches),
      static_cast<double>(plan.pairs) / batches, static_cast<double>(plan.padded_tokens) / batches,
      static_cast<long long>(plan.largest_batch),
      100.0 * static_cast<double>(plan.real_tokens) / static_cast<double>(plan.padded_tokens),
      static_cast<long long>(batcher.skipped_pairs()));
}

}  // namespace

void register_corpus(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "corpus", "Check and encode a parallel corpus (fills the cache) and show its batching");
  auto options = std::make_shared<CorpusCommandOptions>();
  cmd->add_option("--src", options->source, "Source text, plain or .gz")->required();
  cmd->add_option("--tgt", options->target, "Target text, aligned by line")->required();
  cmd->add_option("--vocab", options->vocab, "SentencePiece model (from tfm vocab)")->required();
  cmd->add_option("--cache-dir", options->cache_dir, "Cache the encoded corpus here");
  cmd->add_option("--max-length", options->corpus.max_length,
                  "Skip pairs longer than this many subword tokens (target + 1; 0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->default_str("256");
  cmd->add_option("--max-line-bytes", options->corpus.max_line_bytes,
                  "A longer line is an error (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->default_str("65536");
  cmd->add_flag("--whole-sentences", options->whole_sentences,
                "Encode every sentence whole instead of a word at a time through a memo "
                "(slower; the ids are the same)");
  cmd->add_flag(
      "--skip-invalid-lines", options->corpus.skip_invalid_lines,
      "Skip (and count) pairs with invalid UTF-8 or an over-long line instead of failing");
  cmd->add_flag("--skip-empty-lines", options->corpus.skip_empty_lines,
                "Skip (and count) pairs with an empty line instead of failing");
  cmd->add_option("--max-tokens", options->batcher.max_tokens,
                  "Batch budget: padded source + target tokens")
      ->default_str("50000");
  cmd->add_option("--max-pairs", options->batcher.max_pairs,
                  "At most this many pairs a batch (0: no limit)")
      ->default_str("0");
  cmd->add_option("--window", options->batcher.window_batches,
                  "Sort window, in batches (0: the whole corpus)")
      ->default_str("100");
  // Range in double: CLI11 reads "-1" into a uint64_t as 2^64 - 1.
  cmd->add_option("--seed", options->seed, "Shuffling seed")
      ->check(CLI::Range(0.0, 18446744073709551615.0))
      ->default_str("1");
  cmd->callback([options] { run_corpus(*options); });
}

}  // namespace tfm::internal::cli
