// Validation BLEU during training: greedy translations of the validation sources, detokenized by
// the vocabulary, scored with sacreBLEU's defaults against the raw references. It lives in eval/
// (above decode/ and train/): train/ takes it as a callback (TrainRunOptions::bleu), since the
// training loop sits below the decoder in the layers.
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

namespace tfm::eval {

double greedy_validation_bleu(const nn::Transformer& model, const data::Vocabulary& vocab,
                              const std::vector<std::string>& sources,
                              const std::vector<std::string>& references);

}  // namespace tfm::eval
