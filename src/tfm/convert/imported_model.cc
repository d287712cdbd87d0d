#include "tfm/convert/imported_model.h"

#include <cstring>

#include "tfm/core/error.h"
#include "tfm/model/config.h"
#include "tfm/model/model_dir.h"

namespace tfm::internal::convert {

Tensor transposed(const Tensor& matrix) {
  const int64_t rows = matrix.shape()[0], cols = matrix.shape()[1];
  Tensor out = Tensor::empty({cols, rows});
  const float* in = matrix.data<float>();
  float* o = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o[c * rows + r] = in[r * cols + c];
  return out;
}

Tensor with_zero_rows(const Tensor& matrix, int64_t rows) {
  Tensor out = Tensor::zeros({matrix.shape()[0] + rows, matrix.shape()[1]});
  std::memcpy(out.data<float>(), matrix.data<float>(), matrix.nbytes());
  return out;
}

Tensor with_values(const Tensor& vector, int64_t extra, float value) {
  Tensor out = Tensor::full({vector.numel() + extra}, value);
  std::memcpy(out.data<float>(), vector.data<float>(), vector.nbytes());
  return out;
}

Tensor flattened(const Tensor& tensor) {
  return tensor.view({tensor.numel()});
}

int64_t append_token(ImportedModel& model, const std::string& piece, int64_t copy_of) {
  const int64_t id = static_cast<int64_t>(model.pieces.size());
  for (const std::string& p : model.pieces)
    TFM_CHECK(p != piece, "the id table already has '{}' (id {}): it cannot be added", piece,
              &p - model.pieces.data());
  bool has_bias = false;
  for (auto& [name, tensor] : model.parameters) {
    if (name == "output_projection.bias") {
      tensor = with_values(tensor, 1, kNeverBias);
      has_bias = true;
    } else if (name == "embedding.weight" || name == "source_embedding.weight" ||
               name == "target_embedding.weight" || name == "output_projection.weight") {
      Tensor grown = with_zero_rows(tensor, 1);
      const int64_t d = tensor.shape()[1];
      if (copy_of >= 0)
        std::memcpy(grown.data<float>() + id * d, tensor.data<float>() + copy_of * d,
                    static_cast<size_t>(d) * sizeof(float));
      tensor = grown;
    }
  }
  if (!has_bias) {
    model.parameters.emplace_back("output_projection.bias",
                                  with_values(Tensor::zeros({id}), 1, kNeverBias));
    model.config["output_bias"] = true;
  }
  model.pieces.push_back(piece);
  model.config["vocab_size"] = id + 1;
  return id;
}

void write_imported_model(const ImportedModel& model, const std::filesystem::path& dir,
                          const std::string& from) {
  ModelConfig config;
  try {
    config = config_from_json(model.config);
  } catch (const Error& e) {
    fail("{}: the model's configuration is not one tfm runs: {}", from, e.what());
  }
  TFM_CHECK(static_cast<int64_t>(model.pieces.size()) == config.vocab_size,
            "{}: {} pieces in the vocabulary, but the model has {} embedding rows", from,
            model.pieces.size(), config.vocab_size);
  const nlohmann::ordered_json table = {{"source_eos", model.source_eos}, {"pieces", model.pieces}};
  const VocabularyFiles files = {{kSourceSpmFileName, model.source_spm},
                                 {kTargetSpmFileName, model.target_spm},
                                 {kVocabTableFileName, table.dump(0) + "\n"}};
  save_model_dir(dir, config, model.parameters, files);
}

}  // namespace tfm::internal::convert
