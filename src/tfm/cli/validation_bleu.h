// Validation BLEU for `tfm train`: greedy translations of the validation sources, detokenized by
// the vocabulary, scored with sacreBLEU's defaults against the raw references.
#pragma once

#include <string>
#include <vector>

namespace tfm {
namespace data {
class Vocabulary;
}
namespace nn {
class Transformer;
}
}  // namespace tfm

namespace tfm::cli {

double greedy_validation_bleu(const nn::Transformer& model, const data::Vocabulary& vocab,
                              const std::vector<std::string>& sources,
                              const std::vector<std::string>& references);

}  // namespace tfm::cli
