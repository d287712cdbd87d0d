// A model directory: config.json (ModelConfig) + model.safetensors (the parameters, named as in
// parameter_specs) + vocab.model (the SentencePiece vocabulary, written by the vocabulary tools).
// docs/MODEL_FORMAT.md describes it.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm {

inline constexpr const char* kConfigFileName = "config.json";
inline constexpr const char* kWeightsFileName = "model.safetensors";
inline constexpr const char* kVocabFileName = "vocab.model";

struct LoadedModel {
  ModelConfig config;
  std::vector<std::pair<std::string, Tensor>> parameters;  // in parameter_specs(config) order
  std::map<std::string, std::string> metadata;             // model.safetensors' __metadata__
  bool checksums_verified = false;  // the file carried per-tensor checksums, all matched
  // The parameter of that name; tfm::Error when there is none.
  const Tensor& parameter(const std::string& name) const;
};

// Checks `tensors` against parameter_specs(config): each parameter present once, with its shape and
// dtype F32, and nothing else. Returns them in the canonical order. Throws a one-line tfm::Error
// naming the first problem, e.g. "tensor 'embedding.weight' has shape [100, 32], expected [37000,
// 512]" (the caller prefixes the file).
std::vector<std::pair<std::string, Tensor>> check_parameters(
    const ModelConfig& config, const std::vector<std::pair<std::string, Tensor>>& tensors);

// Creates `dir` (and its parents) when needed and writes model.safetensors (parameters in canonical
// order) then config.json, each atomically. The parameters are checked first: an inconsistent model
// is never written.
void save_model_dir(const std::filesystem::path& dir, const ModelConfig& config,
                    const std::vector<std::pair<std::string, Tensor>>& parameters);

// Throws tfm::Error naming `file` and the first tensor holding a NaN or an infinity.
void check_finite(const std::filesystem::path& file,
                  const std::vector<std::pair<std::string, Tensor>>& tensors);

// Reads and checks a model directory (configuration, shapes, checksums, finite weights); every
// error names the file and the problem.
LoadedModel load_model_dir(const std::filesystem::path& dir);

}  // namespace tfm
