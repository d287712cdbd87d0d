#include "tfm/train/run_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "tfm/core/error.h"
#include "tfm/data/batcher.h"
#include "tfm/io/text_reader.h"
#include "tfm/train/model_batch.h"

namespace fs = std::filesystem;

namespace tfm::internal {

namespace {

std::vector<std::string> read_lines(const fs::path& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) lines.push_back(line);
  return lines;
}

}  // namespace

data::CorpusOptions training_corpus_options(const TrainRecipe& recipe, const ModelConfig& config,
                                            const fs::path& run_dir,
                                            const std::function<void(const std::string&)>& note) {
  data::CorpusOptions options;
  options.max_length = recipe.max_length > 0
                           ? std::min(recipe.max_length, config.longest_sequence())
                           : config.longest_sequence();
  options.skip_empty_lines = recipe.skip_empty_lines;
  options.skip_invalid_lines = recipe.skip_invalid_lines;
  options.cache_dir = run_dir / "cache";
  options.progress = note;
  return options;
}

data::Corpus load_training_corpus(const TrainRecipe& recipe, const data::Vocabulary& vocab,
                                  const data::CorpusOptions& options, dist::Communicator& comm) {
  std::optional<data::Corpus> corpus;
  auto load = [&] {
    corpus.emplace(data::Corpus::load(recipe.train_source, recipe.train_target, vocab, options));
  };
  if (comm.rank() == 0) load();
  comm.barrier();
  if (comm.rank() != 0) load();
  return std::move(*corpus);
}

ValidationSet load_validation_set(const TrainRecipe& recipe, const data::Vocabulary& vocab,
                                  const data::CorpusOptions& options, int64_t max_positions,
                                  const std::function<void(const std::string&)>& note) {
  ValidationSet valid;
  data::CorpusOptions valid_options = options;
  valid_options.max_length = 0;  // score every sentence
  valid.corpus = data::Corpus::load(recipe.valid_source, recipe.valid_target, vocab, valid_options);
  note("valid: " + valid.corpus.stats().summary());
  check_validation_lengths(valid.corpus, recipe, max_positions);
  valid.sources = read_lines(recipe.valid_source);
  valid.references = read_lines(recipe.valid_target);
  if (recipe.valid_max_sentences > 0 &&
      static_cast<int64_t>(valid.sources.size()) > recipe.valid_max_sentences) {
    valid.sources.resize(static_cast<size_t>(recipe.valid_max_sentences));
    valid.references.resize(static_cast<size_t>(recipe.valid_max_sentences));
  }
  return valid;
}

void check_validation_lengths(const data::Corpus& valid, const TrainRecipe& recipe,
                              int64_t max_positions) {
  const bool lines_known = valid.stats().empty_skipped == 0;
  for (int64_t i = 0; i < valid.size(); ++i) {
    const int64_t longest = std::max(valid.source_length(i), valid.target_length(i) + 1);
    if (longest <= max_positions) continue;
    fail(
        "{}{}: the validation pair needs {} positions, more than the model's {} "
        "(model.max_positions): raise it, or remove the pair",
        valid.source_length(i) > max_positions ? recipe.valid_source : recipe.valid_target,
        lines_known ? fmt::format(":{}", i + 1) : fmt::format(" (pair {})", i + 1), longest,
        max_positions);
  }
}

std::vector<nn::Batch> validation_batches(const data::Corpus& valid, int64_t max_tokens,
                                          int32_t decoder_start) {
  std::vector<nn::Batch> batches;
  data::BatcherOptions options;
  options.max_tokens = std::max<int64_t>(max_tokens, 1);
  options.shuffle = false;
  data::Batcher batcher(valid, options, 0);
  for (const auto& plan : batcher.epoch_plan(0))
    batches.push_back(model_batch(batcher.make_batch(plan), decoder_start));
  return batches;
}

}  // namespace tfm::internal
