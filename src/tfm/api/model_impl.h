// The library's side of tfm::Model (include/tfm/model.h): the inference model built once at load
// (precision and device fixed, weights packed, immutable: decode::InferenceModel) and the
// vocabulary. Every tfm::Translator shares it.
#pragma once

#include <filesystem>
#include <memory>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/inference_model.h"
#include "tfm/model.h"
#include "tfm/model/config.h"

namespace tfm {

struct Model::Impl {
  std::filesystem::path dir;
  ModelConfig config;
  DType precision = DType::f32;  // operand type of the products
  Device device = Device::cpu;
  data::Vocabulary vocab;
  std::shared_ptr<const decode::InferenceModel> model;
  int64_t parameter_count = 0;
};

}  // namespace tfm
