// tfm::train: a recipe run into a run directory, as `tfm train` runs it.
#include "tfm/train.h"

#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/eval/bleu.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/train_loop.h"

namespace tfm {

namespace {

// Validation BLEU (validation.bleu): greedy translations scored with sacreBLEU's defaults, as the
// CLI's cli/validation_bleu.cc computes it (one function once that leaves cli/).
double validation_bleu(const nn::Transformer& model, const data::Vocabulary& vocab,
                       const std::vector<std::string>& sources,
                       const std::vector<std::string>& references) {
  decode::TranslateOptions options;
  options.beam_size = 1;
  options.batch_size = 64;
  // A source beyond max_positions is cut there: a validation score should not end a run.
  const auto longest = static_cast<size_t>(decode::max_input_length(options, model.config()));
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& s : sources) {
    ids.push_back(vocab.encode(s));
    if (ids.back().size() > longest) ids.back().resize(longest);
  }
  std::vector<std::string> hypotheses;
  for (const auto& nbest : decode::translate(model, ids, options))
    hypotheses.push_back(nbest.empty() ? std::string() : vocab.decode(nbest.front().tokens));
  return eval::corpus_bleu(hypotheses, {references}).score;
}

}  // namespace

TrainingResult train(const TrainingOptions& options) {
  TrainRecipe recipe = options.recipe.empty() ? TrainRecipe{} : load_recipe(options.recipe);
  for (const std::string& assignment : options.overrides) apply_override(recipe, assignment);
  if (!options.run_dir.empty()) recipe.run_dir = options.run_dir.string();
  if (options.max_steps >= 0) recipe.max_steps = options.max_steps;
  if (options.max_minutes >= 0) recipe.max_minutes = options.max_minutes;
  if (options.threads >= 0) recipe.threads = options.threads;
  TrainRunOptions run;
  run.resume = options.resume;
  run.bleu = validation_bleu;
  const TrainSummary summary = run_training(recipe, run);
  TrainingResult result;
  result.steps = summary.steps;
  result.elapsed_seconds = summary.elapsed_seconds;
  result.last_valid_loss = summary.last_valid_loss;
  result.last_valid_bleu = summary.last_valid_bleu;
  result.interrupted = summary.interrupted;
  result.last_checkpoint = summary.last_checkpoint;
  return result;
}

}  // namespace tfm
