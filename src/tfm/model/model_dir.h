// A model directory: config.json (ModelConfig) + model.safetensors (the parameters, named as in
// parameter_specs) + vocab.model (the SentencePiece vocabulary). model.safetensors records the
// CRC-32 of the vocab.model it was written with, so that a directory mixing two models' files is
// refused. docs/MODEL_FORMAT.md describes it.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/model/config.h"

namespace tfm::internal {

inline constexpr const char* kConfigFileName = "config.json";
inline constexpr const char* kWeightsFileName = "model.safetensors";
inline constexpr const char* kVocabFileName = "vocab.model";
// The key of model.safetensors' __metadata__ that holds vocab.model's CRC-32 (8 hex digits).
inline constexpr const char* kVocabChecksumKey = "vocab_crc32";
// An imported model's vocabulary (tfm convert; data/vocab.h): the source and target SentencePiece
// models and the id table they share. Their CRC-32s are recorded as "vocab_crc32:<file name>".
inline constexpr const char* kSourceSpmFileName = "source.spm";
inline constexpr const char* kTargetSpmFileName = "target.spm";
inline constexpr const char* kVocabTableFileName = "vocab.json";

// A model directory's vocabulary files by name: vocab.model alone, or source.spm, target.spm and
// vocab.json; none for a model without a vocabulary.
using VocabularyFiles = std::map<std::string, std::string>;

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

// Writes a model directory all or nothing: the parameters are checked first (an inconsistent model
// is never written), the directory is built beside `dir` ("<dir>.partial-<pid>") with
// write_model_files, then renamed to `dir` (io/atomic_dir.h's replace_directory). An existing `dir`
// is replaced as a whole, old vocab.model included; it may hold only a model's files
// (config.json, model.safetensors, vocab.model), so that nothing else is deleted with it. The
// parents of `dir` are created when needed; a symbolic link to a directory is followed.
// `vocabulary`: vocab.model's bytes, or none for a model directory without one.
void save_model_dir(const std::filesystem::path& dir, const ModelConfig& config,
                    const std::vector<std::pair<std::string, Tensor>>& parameters,
                    const std::optional<std::string>& vocabulary = std::nullopt);
// The same with the vocabulary files given by name (VocabularyFiles above).
void save_model_dir(const std::filesystem::path& dir, const ModelConfig& config,
                    const std::vector<std::pair<std::string, Tensor>>& parameters,
                    const VocabularyFiles& vocabulary);

// The files of a model into `dir`, an existing directory no reader uses yet (the one that
// save_model_dir or a checkpoint builds): vocab.model when given, model.safetensors (parameters in
// canonical order, the vocabulary's checksum in its metadata), then config.json.
void write_model_files(const std::filesystem::path& dir, const ModelConfig& config,
                       const std::vector<std::pair<std::string, Tensor>>& parameters,
                       const std::optional<std::string>& vocabulary);
void write_model_files(const std::filesystem::path& dir, const ModelConfig& config,
                       const std::vector<std::pair<std::string, Tensor>>& parameters,
                       const VocabularyFiles& vocabulary);

// Throws tfm::Error naming `file` and the first tensor holding a NaN or an infinity.
void check_finite(const std::filesystem::path& file,
                  const std::vector<std::pair<std::string, Tensor>>& tensors);

// Reads and checks a model directory (configuration, shapes, checksums, finite weights, and
// vocab.model against the checksum that model.safetensors recorded, when it recorded one and the
// file is there); every error names the file and the problem.
LoadedModel load_model_dir(const std::filesystem::path& dir);

}  // namespace tfm::internal
