#include "tfm/translation/model_loading.h"

#include "tfm/core/error.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/device.h"

namespace tfm::internal::translation {

decode::InferenceOptions inference_options(const std::string& precision,
                                           const std::string& device) {
  decode::InferenceOptions inference;
  decode::parse_inference_precision(precision, "--precision", inference);
  inference.device = ops::parse_device(device);
  ops::use_device(inference.device);
  return inference;
}

data::Vocabulary model_vocabulary(const std::filesystem::path& dir, const ModelConfig& config,
                                  const std::string& why) {
  const std::filesystem::path path = dir / kVocabFileName;
  TFM_CHECK(std::filesystem::exists(path) || std::filesystem::exists(dir / kVocabTableFileName),
            "{}: missing; {}", path.string(), why);
  data::Vocabulary vocab = data::Vocabulary::of_model_dir(dir);
  vocab.check_config(config, dir / kConfigFileName);
  return vocab;
}

}  // namespace tfm::internal::translation
