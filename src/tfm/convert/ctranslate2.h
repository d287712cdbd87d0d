// tfm's models as CTranslate2 model directories (model.bin, config.json, shared_vocabulary.json),
// as CTranslate2's own converters write them (python/ctranslate2/specs/model_spec.py and
// transformer_spec.py, v4.8.1: TransformerSpec, binary version 6, spec revision 5).
#pragma once

#include <filesystem>

namespace tfm::internal::convert {

// Writes `out` (created; files in it replaced) from the tfm model directory `model_dir`. int8:
// every linear and embedding weight per output row as CTranslate2's --quantization int8 stores it
// (scale = 127 / max|w|, rint(w * scale), the scale beside it as "<name>_scale"). Refuses, naming
// the key, what CTranslate2 cannot run: d_k or d_v other than d_model / heads, a parsing model.
void export_ctranslate2(const std::filesystem::path& model_dir, const std::filesystem::path& out,
                        bool int8);

}  // namespace tfm::internal::convert
