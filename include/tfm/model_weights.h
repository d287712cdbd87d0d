// A model directory's contents as plain data, for moving models between tfm and other frameworks
// (the Python bindings' load_model and save_model): config.json's keys as JSON text and every
// parameter by name (docs/MODEL_FORMAT.md lists the names and shapes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/export.h"

namespace tfm {

struct Weight {
  std::string name;             // e.g. "encoder.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   // as docs/MODEL_FORMAT.md gives it for the configuration
  const float* data = nullptr;  // row-major f32, the product of `shape` values
  // Keeps `data` alive: read_model_weights sets it to the memory the file was read into; a caller
  // writing its own memory may leave it empty.
  std::shared_ptr<const void> owner;
};

struct ModelWeights {
  std::string config_json;      // every key of config.json, in the file's order
  std::vector<Weight> weights;  // the parameters, in model.safetensors' (canonical) order
};

// Reads and checks a model directory's config.json and model.safetensors as Model::load does
// (configuration, names, shapes, checksums, finite values); its vocabulary is not needed. Each
// weight's data is the memory the file was read into, not a further copy.
TFM_API ModelWeights read_model_weights(const std::filesystem::path& dir);

// Writes a model directory that Model::load (and `tfm translate`) reads. `vocabulary` is a
// SentencePiece model's bytes (what vocab.model holds). Everything is checked before anything is
// written: the configuration (unknown keys, ranges), every parameter present once with its shape
// and finite values, nothing else, and the vocabulary against the configuration (size, special
// ids). Then the directory is written all or nothing (built beside `dir`, then renamed to it;
// an existing `dir` of model files is replaced as a whole, one holding other files is refused);
// model.safetensors records vocab.model's CRC-32 (docs/MODEL_FORMAT.md).
TFM_API void write_model_weights(const std::filesystem::path& dir, const ModelWeights& model,
                                 std::string_view vocabulary);

}  // namespace tfm
