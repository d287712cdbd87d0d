// Validation BLEU during training: greedy translations of the validation sources, detokenized by
// the vocabulary, scored with sacreBLEU's defaults against the raw references. For a parsing model
// (config task "parsing") the score is labelled bracketing F1 instead (greedy_validation_f1). It
// lives in eval/ (above decode/ and train/): train/ takes it as a callback (TrainRunOptions::bleu),
// since the training loop sits below the decoder in the layers.
#pragma once

#include <string>
#include <vector>

namespace tfm::internal {
namespace data {
class Vocabulary;
}
namespace nn {
class Transformer;
}
}  // namespace tfm::internal

namespace tfm::internal::eval {

double greedy_validation_bleu(const nn::Transformer& model, const data::Vocabulary& vocab,
                              const std::vector<std::string>& sources,
                              const std::vector<std::string>& references);

// Parsing: sources are sentences' words, references their linearised trees. Greedy parses under
// the tree constraint (tasks/tree_constraint.h, as tfm parse decodes) are scored against the
// references' trees with EVALB's COLLINS.prm (tags from data::guess_tag on both sides, so that
// punctuation is deleted alike); returns the F1 of all lengths, 0 when no sentence could be scored.
double greedy_validation_f1(const nn::Transformer& model, const data::Vocabulary& vocab,
                            const std::vector<std::string>& sources,
                            const std::vector<std::string>& references);

// greedy_validation_f1 for a parsing model, greedy_validation_bleu otherwise.
double greedy_validation_score(const nn::Transformer& model, const data::Vocabulary& vocab,
                               const std::vector<std::string>& sources,
                               const std::vector<std::string>& references);

}  // namespace tfm::internal::eval
