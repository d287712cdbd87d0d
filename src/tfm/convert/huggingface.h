// Hugging Face's MarianMT layout: config.json (MarianConfig), model.safetensors (names
// model.encoder.layers.N.self_attn.q_proj.weight, ..., model.shared.weight, final_logits_bias,
// lm_head.weight), vocab.json and source.spm/target.spm, as transformers' modeling_marian.py and
// convert_marian_to_pytorch.py write and read them.
#pragma once

#include <filesystem>

#include "tfm/convert/imported_model.h"

namespace tfm::internal::convert {

// `source`: the model's directory. Errors name the file and the tensor or key.
ImportedModel import_huggingface(const std::filesystem::path& source);

}  // namespace tfm::internal::convert
