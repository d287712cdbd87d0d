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
