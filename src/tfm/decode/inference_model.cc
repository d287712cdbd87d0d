#include "tfm/decode/inference_model.h"

#include <algorithm>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal::decode {

namespace {
// The model with its weights copied to `device` (itself on its own device).
nn::Transformer on_device(nn::Transformer model, Device device) {
  ops::use_device(device);
  if (device == Device::cpu) return model;
  nn::NamedTensors moved;
  for (const auto& [name, tensor] : model.named_parameters())
    moved.emplace_back(name, tensor.to(device));
  return nn::Transformer(model.config(), moved);
}
}  // namespace

InferenceModel::InferenceModel(nn::Transformer model, const InferenceOptions& options)
    : model_(on_device(std::move(model), options.device)), options_(options) {
  TFM_CHECK(options.precision == DType::f32 || options.precision == DType::bf16,
            "inference model: precision {} is not supported (f32 or bf16)",
            dtype_name(options.precision));
  // Packed here, once: a linear packed for one product would cost more than it saves, and a model
  // packed once serves every thread without a lock.
  const DType weights = options.int8 ? DType::i8 : options.precision;
  model_.pack(weights);
  const Tensor& embedding = model_.output_embedding();
  const int64_t vocab = embedding.dim(0);
  // A GPU multiplies the whole embedding at once (one block); the CPU in cache-sized blocks.
  const int64_t block = options.device == Device::cpu ? kOutputBlockTokens : vocab;
  for (int64_t first = 0; first < vocab; first += block)
    output_blocks_.push_back(
        ops::pack_weight(embedding.slice_rows(first, std::min(vocab, first + block)), weights));
}

void parse_inference_precision(const std::string& name, const char* what,
                               InferenceOptions& options) {
  options.int8 = name == "int8" || name == "int8-bf16";
  if (!options.int8) {
    if (name != "f32" && name != "bf16" && name != "auto")
      fail("{}: '{}' is not a precision (f32, bf16, auto, int8 or int8-bf16)", what, name);
    options.precision = ops::parse_precision(name, what);
    return;
  }
  options.precision = name == "int8-bf16" ? DType::bf16 : DType::f32;
}

std::string precision_name(const InferenceOptions& options) {
  if (!options.int8) return std::string(dtype_name(options.precision));
  return options.precision == DType::bf16 ? "int8-bf16" : "int8";
}

std::shared_ptr<const InferenceModel> load_inference_model(const std::filesystem::path& dir,
                                                           const InferenceOptions& options) {
  LoadedModel loaded = load_model_dir(dir);
  return std::make_shared<const InferenceModel>(nn::Transformer(loaded.config, loaded.parameters),
                                                options);
}

}  // namespace tfm::internal::decode
