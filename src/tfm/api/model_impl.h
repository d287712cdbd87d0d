// The library's side of tfm::Model (include/tfm/model.h): the inference model built once at load
// (precision and device fixed, weights packed, immutable: internal::decode::InferenceModel) and the
// vocabulary. Every tfm::Translator shares it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/inference_model.h"
#include "tfm/model.h"
#include "tfm/model/config.h"

namespace tfm {

struct Model::Impl {
  std::filesystem::path dir;
  internal::ModelConfig config;
  std::string precision;  // decode::precision_name: "f32", "bf16", "int8" or "int8-bf16"
  internal::Device device = internal::Device::cpu;
  internal::data::Vocabulary vocab;
  std::shared_ptr<const internal::decode::InferenceModel> model;
  int64_t parameter_count = 0;
};

// Model::Impl is the library's business: include/tfm/model.h names this struct its friend, and
// tfm's own code (the Translator) reaches a Model's Impl through it.
struct ModelAccess {
  static const Model::Impl& impl(const Model& model) { return *model.impl_; }
};

}  // namespace tfm
