// The model a translation runs on, built once: its precision (the products' operand type) and
// device are fixed at load, and every weight a translation multiplies with is packed then, in that
// precision, and never changes after. Nothing in it is mutable (no lazy caches), so one
// InferenceModel, held by a shared_ptr<const InferenceModel>, serves any number of threads: each
// decoding worker (decode::Translator) owns its scratch state (key/value caches, buffers) and its
// thread count. docs/ARCHITECTURE.md ("The inference model") describes the design; training keeps
// its own, mutable and unpacked, nn::Transformer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/model/config.h"
#include "tfm/nn/transformer.h"

namespace tfm::internal::ops {
class PackedWeight;
}

namespace tfm::internal::decode {

// Tokens per block of the output projection: the decoding step multiplies with the embedding in
// blocks of this many rows, so that a [128, 1024] f32 block of logits (512 KiB) stays in the core's
// cache while the fused log-softmax and top-k read it (TransformerScorer::step_top).
inline constexpr int64_t kOutputBlockTokens = 1024;

struct InferenceOptions {
  // Operand type of every matrix product: f32, or bf16 (f32 accumulation; LayerNorm, softmax and
  // the log-probabilities stay f32).
  DType precision = DType::f32;
  Device device = Device::cpu;  // cpu, or cuda (weights copied to the GPU when loaded)
  // int8 inference (CPU only): every linear's weight and the output projection packed as i8 (a
  // scale per output row), their activations quantised per row at every product; the attention
  // products, the key/value caches and everything between products stay in `precision`.
  bool int8 = false;
};

// Reads a precision name into options' precision and int8: "f32", "bf16", "auto" (bf16 where the
// CPU multiplies bf16 natively, else f32), "int8" (int8 linears, f32 elsewhere) and "int8-bf16"
// (int8 linears, bf16 elsewhere). `what` names the setting in the error.
void parse_inference_precision(const std::string& name, const char* what,
                               InferenceOptions& options);
// The name parse_inference_precision reads for options ("auto" resolved).
std::string precision_name(const InferenceOptions& options);

class InferenceModel {
 public:
  // Takes `model` (a copy of an nn::Transformer shares its tensors: copying costs no weights) and
  // packs every linear's weight and the output projection's blocks in options.precision. The
  // packed weights are copies; the tensors read as they are (embedding rows, positions, LayerNorm,
  // biases) stay shared with the source, which must not change them while this model is in use.
  InferenceModel(nn::Transformer model, const InferenceOptions& options);
  InferenceModel(const InferenceModel&) = delete;
  InferenceModel& operator=(const InferenceModel&) = delete;

  const nn::Transformer& transformer() const { return model_; }
  const ModelConfig& config() const { return model_.config(); }
  DType precision() const { return options_.precision; }  // of the products not in int8
  bool int8() const { return options_.int8; }
  const InferenceOptions& options() const { return options_; }
  Device device() const { return options_.device; }
  // The output projection (the shared embedding [V, d_model]) in blocks of kOutputBlockTokens
  // rows (the last one shorter), packed in precision() (or i8).
  const std::vector<std::shared_ptr<const ops::PackedWeight>>& output_blocks() const {
    return output_blocks_;
  }

 private:
  nn::Transformer model_;
  InferenceOptions options_;
  std::vector<std::shared_ptr<const ops::PackedWeight>> output_blocks_;
};

// Reads a model directory (load_model_dir: configuration, checked weights), builds its
// nn::Transformer from the loaded weights (no random initialisation) and packs it.
std::shared_ptr<const InferenceModel> load_inference_model(const std::filesystem::path& dir,
                                                           const InferenceOptions& options);

}  // namespace tfm::internal::decode
