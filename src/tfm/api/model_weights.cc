// tfm::read_model_weights and write_model_weights: a model directory as JSON text and named f32
// arrays, over the model directory code (load_model_dir, save_model_dir).
#include "tfm/model_weights.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/core/tensor.h"
#include "tfm/data/vocab.h"
#include "tfm/model/config.h"
#include "tfm/model/model_dir.h"

namespace tfm {

using namespace internal;  // the library's layers, which these public calls wrap

ModelWeights read_model_weights(const std::filesystem::path& dir) {
  LoadedModel loaded = load_model_dir(dir);
  ModelWeights model;
  model.config_json = config_to_json(loaded.config).dump(2);
  for (auto& [name, tensor] : loaded.parameters) {
    Weight& weight = model.weights.emplace_back();
    weight.name = name;
    weight.shape = tensor.shape().to_vector();
    weight.data = tensor.data<float>();
    // The weight shares the tensor's storage; the last of its users frees it.
    weight.owner = std::make_shared<Tensor>(std::move(tensor));
  }
  return model;
}

void write_model_weights(const std::filesystem::path& dir, const ModelWeights& model,
                         std::string_view vocabulary) {
  const std::filesystem::path config_path = dir / kConfigFileName;
  const std::filesystem::path weights_path = dir / kWeightsFileName;
  ModelConfig config;
  try {
    config = config_from_json(nlohmann::ordered_json::parse(model.config_json));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: refusing to save: the configuration is not valid JSON: {}", config_path.string(),
         e.what());
  } catch (const Error& e) {
    fail("{}: refusing to save: {}", config_path.string(), e.what());
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const Weight& weight : model.weights) {
    TFM_CHECK(weight.data != nullptr || weight.shape.empty(),
              "{}: refusing to save: weight '{}' has no data", weights_path.string(), weight.name);
    Tensor tensor = Tensor::empty(Shape(weight.shape));
    if (tensor.numel() > 0)
      std::memcpy(tensor.data<float>(), weight.data, static_cast<size_t>(tensor.nbytes()));
    tensors.emplace_back(weight.name, std::move(tensor));
  }
  try {
    tensors = check_parameters(config, tensors);
  } catch (const Error& e) {
    fail("{}: refusing to save: {}", weights_path.string(), e.what());
  }
  check_finite(weights_path, tensors);
  const std::filesystem::path vocab_path = dir / kVocabFileName;
  data::Vocabulary(vocabulary, vocab_path).check_config(config, config_path);
  // All three files or none: an existing directory is replaced as a whole.
  save_model_dir(dir, config, tensors, std::string(vocabulary));
}

}  // namespace tfm
