// The library's side of tfm::Model (include/tfm/model.h): the loaded weights, the vocabulary and
// the settings fixed at load. Today the Transformer and ops::AutocastScope per call; an inference
// model built once (weights packed at load) replaces them here without touching the public headers.
#pragma once

#include <filesystem>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/data/vocab.h"
#include "tfm/model.h"
#include "tfm/model/config.h"
#include "tfm/nn/transformer.h"

namespace tfm {

struct Model::Impl {
  std::filesystem::path dir;
  ModelConfig config;
  DType precision = DType::f32;  // operand type of the products
  Device device = Device::cpu;
  data::Vocabulary vocab;
  nn::Transformer transformer;
  int64_t parameter_count = 0;
};

namespace api {

// Sets this thread's kernel thread count (OpenMP's, per thread) for a call, and restores it.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int threads);
  ~ThreadCountScope();
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int previous_;
};

}  // namespace api
}  // namespace tfm
