// A translation model loaded from a model directory (config.json, model.safetensors, vocab.model;
// docs/MODEL_FORMAT.md). Precision and device are fixed when it is loaded; after that a Model is
// immutable and may be shared by any number of threads, each translating through its own
// Translator.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/export.h"
#include "tfm/options.h"

namespace tfm {

struct LoadOptions {
  Precision precision = Precision::f32;       // operand type of the matrix products (options.h)
  ComputeDevice device = ComputeDevice::cpu;  // ComputeDevice::cuda: a CUDA build and a GPU
};

class TFM_API Model {
 public:
  // Reads and checks the directory (configuration, shapes, checksums, finite weights, vocabulary);
  // a tfm::Error names the file and the problem.
  static std::shared_ptr<const Model> load(const std::filesystem::path& dir,
                                           const LoadOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::filesystem::path& dir() const;
  std::string precision() const;  // "f32", "bf16", "int8" or "int8-bf16" ("auto" resolved)
  std::string device() const;
  int64_t vocab_size() const;
  int64_t layers() const;  // the encoder's
  // The decoder's: layers() unless the model has a shallower or deeper decoder.
  int64_t decoder_layers() const;
  int64_t d_model() const;
  int64_t parameter_count() const;

  // The model's SentencePiece vocabulary (vocab.model): a sentence's subword pieces, their ids (a
  // piece the vocabulary lacks: unk's), and the sentence of a sequence of pieces.
  std::vector<std::string> tokenize(std::string_view text) const;
  std::vector<int32_t> token_ids(const std::vector<std::string>& tokens) const;
  std::string detokenize(const std::vector<std::string>& tokens) const;

  struct Impl;  // the library's own view of the model (src/tfm/api/model_impl.h)

 private:
  friend struct ModelAccess;  // how tfm's own code reaches impl_ (src/tfm/api/model_impl.h)
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
