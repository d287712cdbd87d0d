#include "tfm/decode/inference_model.h"

#include <algorithm>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::decode {

InferenceModel::InferenceModel(nn::Transformer model, const InferenceOptions& options)
    : model_(std::move(model)), options_(options) {
  TFM_CHECK(options.precision == DType::f32 || options.precision == DType::bf16,
            "inference model: precision {} is not supported (f32 or bf16)",
            dtype_name(options.precision));
  TFM_CHECK(options.device == Device::cpu,
            "inference model: device {} is not supported in this build (cpu)",
            device_name(options.device));
  // Packed here, once: a linear packed for one product would cost more than it saves, and a model
  // packed once serves every thread without a lock.
  model_.pack(options.precision);
  const Tensor& embedding = model_.output_embedding();
  const int64_t vocab = embedding.dim(0);
  for (int64_t first = 0; first < vocab; first += kOutputBlockTokens)
    output_blocks_.push_back(
        ops::pack_weight(embedding.slice_rows(first, std::min(vocab, first + kOutputBlockTokens)),
                         options.precision));
}

std::shared_ptr<const InferenceModel> load_inference_model(const std::filesystem::path& dir,
                                                           const InferenceOptions& options) {
  LoadedModel loaded = load_model_dir(dir);
  return std::make_shared<const InferenceModel>(nn::Transformer(loaded.config, loaded.parameters),
                                                options);
}

}  // namespace tfm::decode
