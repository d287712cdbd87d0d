// A model read from another framework's files, before it is written as a tfm model directory:
// the configuration (config.json's keys, the variants included), the parameters under tfm's names
// (docs/MODEL_FORMAT.md) and the vocabulary files (data/imported_vocab.h: source and target
// SentencePiece models sharing one id table).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal::convert {

struct ImportedModel {
  nlohmann::ordered_json config;                           // config.json's keys
  std::vector<std::pair<std::string, Tensor>> parameters;  // tfm's names
  std::string source_spm;                                  // source.spm's bytes
  std::string target_spm;                                  // target.spm's bytes
  std::vector<std::string> pieces;                         // the id table: id -> piece
  bool source_eos = true;  // "</s>" ends every source sentence (Marian, fairseq)
};

// The model as a tfm model directory (model/model_dir.h's save_model_dir: checked, atomic, with
// checksums) with source.spm, target.spm and vocab.json. Errors name `from` (the input) and the
// problem, e.g. a configuration tfm refuses.
void write_imported_model(const ImportedModel& model, const std::filesystem::path& dir,
                          const std::string& from);

// Helpers shared by the readers.
// [rows, cols] -> [cols, rows] (Marian stores linear weights as [in, out]; tfm as [out, in]).
Tensor transposed(const Tensor& matrix);
// `matrix` with `rows` more rows of zeros.
Tensor with_zero_rows(const Tensor& matrix, int64_t rows);
// `vector` with `extra` more elements of `value`.
Tensor with_values(const Tensor& vector, int64_t extra, float value);
// A 1 x n or n array as the vector of its n elements.
Tensor flattened(const Tensor& tensor);

// Appends a token to the model: `piece` to the id table, a row to every vocabulary matrix (zeros,
// or a copy of token `copy_of`'s row) and kNeverBias to the output bias (created with zeros for the
// other tokens, and output_bias set, when the model has none), so that the token can be a decoder
// input (Marian's zero start, fairseq's </s> start) but is never an output. Returns its id.
int64_t append_token(ImportedModel& model, const std::string& piece, int64_t copy_of = -1);

// The output bias that the converters give the appended <pad> row: its logit is then 0·h - 1e9, so
// that a search never picks it (exp(-1e9) is 0 in f32, so the other tokens' probabilities are
// unchanged). Hugging Face forbids it the same way (generation's bad_words_ids = [[pad]]).
inline constexpr float kNeverBias = -1e9f;

}  // namespace tfm::internal::convert
