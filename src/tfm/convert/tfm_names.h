// The staging folder that the Python converters (python/tfm/convert.py: fairseq) write: the model
// already under tfm's names and keys, not yet checked. `tfm convert --from tfm-names` reads it and
// writes the model directory through the same checks as the C++ readers.
#pragma once

#include <filesystem>

#include "tfm/convert/imported_model.h"

namespace tfm::internal::convert {

// `folder`: config.json (config.json's keys), model.safetensors (F32, tfm's parameter names),
// source.spm, target.spm, vocab.json ({"source_eos": bool, "pieces": [...]}).
ImportedModel import_tfm_names(const std::filesystem::path& folder);

}  // namespace tfm::internal::convert
