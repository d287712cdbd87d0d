// tfm::Model: a model directory read once; precision and device fixed at load.
#include <utility>

#include "tfm/api/model_impl.h"
#include "tfm/core/error.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"

namespace tfm {

using namespace internal;  // the library's layers, which these public calls wrap

std::shared_ptr<const Model> Model::load(const std::filesystem::path& dir,
                                         const LoadOptions& options) {
  // The options first: a bad setting is reported before any file is read.
  decode::InferenceOptions inference;
  decode::parse_inference_precision(std::string(to_string(options.precision)), "precision",
                                    inference);
  const Device device = ops::parse_device(std::string(to_string(options.device)));
  ops::use_device(device);  // a missing GPU is reported before any file is read
  LoadedModel loaded = load_model_dir(dir);
  const std::filesystem::path vocab_path = dir / kVocabFileName;
  TFM_CHECK(
      std::filesystem::exists(vocab_path) || std::filesystem::exists(dir / kVocabTableFileName),
      "{}: missing; a model directory needs its SentencePiece vocabulary to translate text",
      vocab_path.string());
  data::Vocabulary vocab = data::Vocabulary::of_model_dir(dir);
  vocab.check_config(loaded.config, dir / kConfigFileName);
  int64_t count = 0;
  for (const auto& [name, tensor] : loaded.parameters) count += tensor.numel();
  // Built from the loaded weights (adopted, not copied) and packed once in the precision.
  inference.device = device;
  auto model = std::make_shared<const decode::InferenceModel>(
      nn::Transformer(loaded.config, loaded.parameters), inference);
  auto impl = std::make_unique<Impl>(Impl{dir, loaded.config, precision_name(inference), device,
                                          std::move(vocab), std::move(model), count});
  return std::shared_ptr<const Model>(new Model(std::move(impl)));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

const std::filesystem::path& Model::dir() const {
  return impl_->dir;
}
std::string Model::precision() const {
  return impl_->precision;
}
std::string Model::device() const {
  return std::string(device_name(impl_->device));
}
int64_t Model::vocab_size() const {
  return impl_->config.vocab_size;
}
int64_t Model::layers() const {
  return impl_->config.layers;
}
int64_t Model::decoder_layers() const {
  return impl_->config.decoder_depth();
}
int64_t Model::d_model() const {
  return impl_->config.d_model;
}
int64_t Model::parameter_count() const {
  return impl_->parameter_count;
}

std::vector<std::string> Model::tokenize(std::string_view text) const {
  return impl_->vocab.pieces(text);
}

std::vector<int32_t> Model::token_ids(const std::vector<std::string>& tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  for (const std::string& token : tokens) ids.push_back(impl_->vocab.id(token));
  return ids;
}

std::string Model::detokenize(const std::vector<std::string>& tokens) const {
  return impl_->vocab.decode(token_ids(tokens));
}

}  // namespace tfm
