#include "tfm/eval/validation_bleu.h"

#include "tfm/data/vocab.h"
#include "tfm/decode/translate.h"
#include "tfm/eval/bleu.h"
#include "tfm/nn/transformer.h"

namespace tfm::eval {

double greedy_validation_bleu(const nn::Transformer& model, const data::Vocabulary& vocab,
                              const std::vector<std::string>& sources,
                              const std::vector<std::string>& references) {
  decode::TranslateOptions options;
  options.beam_size = 1;
  options.batch_size = 64;
  // A source beyond the model's max_positions is cut there (translate() would refuse it): a
  // validation score should not end a training run.
  const auto longest = static_cast<size_t>(decode::max_input_length(options, model.config()));
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& s : sources) {
    ids.push_back(vocab.encode(s));
    if (ids.back().size() > longest) ids.back().resize(longest);
  }
  auto results = decode::translate(model, ids, options);
  std::vector<std::string> hypotheses;
  for (const auto& nbest : results)
    hypotheses.push_back(nbest.empty() ? std::string() : vocab.decode(nbest.front().tokens));
  return corpus_bleu(hypotheses, {references}).score;
}

}  // namespace tfm::eval
