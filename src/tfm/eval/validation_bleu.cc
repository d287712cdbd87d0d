#include "tfm/eval/validation_bleu.h"

#include <cmath>

#include "tfm/data/tree_sequences.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/eval/bleu.h"
#include "tfm/eval/evalb.h"
#include "tfm/nn/transformer.h"
#include "tfm/tasks/parsing.h"
#include "tfm/translation/text_translation.h"

namespace tfm::internal::eval {

double greedy_validation_bleu(const nn::Transformer& model, const data::Vocabulary& vocab,
                              const std::vector<std::string>& sources,
                              const std::vector<std::string>& references) {
  decode::TranslateOptions options;
  options.beam_size = 1;
  options.batch_size = 64;
  // A source beyond the model's max_positions is cut there (translate() would refuse it): a
  // validation score should not end a training run.
  const translation::LengthPolicy policy{decode::max_input_length(options, model.config()),
                                         translation::LongInputs::cut};
  const auto ids = translation::encode_lines(vocab, sources, policy, "validation");
  std::vector<std::string> hypotheses;
  for (const translation::NBest& nbest : decode::translate(model, ids, options))
    hypotheses.push_back(translation::best_text(vocab, nbest));
  return corpus_bleu(hypotheses, {references}).score;
}

double greedy_validation_f1(const nn::Transformer& model, const data::Vocabulary& vocab,
                            const std::vector<std::string>& sources,
                            const std::vector<std::string>& references) {
  decode::TranslateOptions options = tasks::paper_parse_options();
  options.beam_size = 1;
  options.batch_size = 64;
  const auto longest = static_cast<size_t>(decode::max_input_length(options, model.config()));
  // A lexicalised reference's leaves are its words: read as the placeholder scheme.
  const bool words = data::tree_leaves_named(model.config().tree_leaves) == data::TreeLeaves::words;
  std::vector<tasks::ParseInput> inputs;
  std::vector<data::Tree> gold;
  for (size_t i = 0; i < sources.size() && i < references.size(); ++i) {
    tasks::ParseInput input;
    input.words = data::split_words(sources[i]);
    // Sentences too long for the model are left out: a validation score should not end a run.
    if (input.words.empty() || vocab.encode(sources[i]).size() > longest) continue;
    const std::string reference = words ? data::placeholder_leaves(references[i]) : references[i];
    gold.push_back(data::repair(reference, input.words).tree);
    inputs.push_back(std::move(input));
  }
  std::vector<data::Tree> test;
  // With the tree constraint, as tfm parse decodes by default: checkpoints are chosen by the F1 of
  // the parser a user runs (its greedy form), not of the unconstrained model.
  for (tasks::ParseResult& result : tasks::parse(model, options, vocab, inputs, 1, true))
    test.push_back(std::move(result.trees.front().tree));
  EvalbParams params = evalb_params("collins");
  params.max_error = static_cast<int>(gold.size()) + 1;
  const double f1 = evalb(gold, test, params).all.f1();
  return std::isfinite(f1) ? f1 : 0.0;
}

double greedy_validation_score(const nn::Transformer& model, const data::Vocabulary& vocab,
                               const std::vector<std::string>& sources,
                               const std::vector<std::string>& references) {
  if (model.config().task == "parsing")
    return greedy_validation_f1(model, vocab, sources, references);
  return greedy_validation_bleu(model, vocab, sources, references);
}

}  // namespace tfm::internal::eval
