// What the model-reading services and commands (translate, parse, attention, serve, sweep) share:
// the inference options of --precision and --device, and the model directory's vocabulary.
#pragma once

#include <filesystem>
#include <string>

#include "tfm/data/vocab.h"
#include "tfm/decode/inference_model.h"
#include "tfm/model/config.h"

namespace tfm::internal::translation {

// --precision and --device as InferenceOptions; the device is made current here, so that a
// missing GPU is reported before the model is read.
decode::InferenceOptions inference_options(const std::string& precision, const std::string& device);

// dir's vocab.model, checked against the model's configuration (special ids, size). A missing file
// is an error that ends with `why` ("a parser needs its vocabulary").
data::Vocabulary model_vocabulary(const std::filesystem::path& dir, const ModelConfig& config,
                                  const std::string& why);

}  // namespace tfm::internal::translation
