// Marian's models (OPUS-MT): the .npz of parameters with its special:model.yml, the vocabulary
// .yml (piece: id) and the SentencePiece models source.spm and target.spm. The mapping of names
// follows Marian's own (src/models/transformer.h) as CTranslate2's converter reads them
// (python/ctranslate2/converters/marian.py, v4.8.1); docs/CONVERTING.md lists it.
#pragma once

#include <filesystem>

#include "tfm/convert/imported_model.h"

namespace tfm::internal::convert {

// `source`: a directory holding decoder.yml (whose models: and vocabs: name the .npz and the
// .yml), or else exactly one .npz and one *vocab*.yml; and source.spm, target.spm. Every problem
// is a one-line tfm::Error naming the file and the array or option.
ImportedModel import_marian(const std::filesystem::path& source);

// Marian's vocabulary .yml ("piece: id" per line, pieces quoted as YAML writes them) as the id
// table. Errors name the file and the line.
std::vector<std::string> read_marian_vocab(const std::filesystem::path& path);

}  // namespace tfm::internal::convert
