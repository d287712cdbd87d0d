// Basic modules: each owns its parameters and composes ops; none has a backward of its own (the ops
// record theirs on the tape).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/nn/context.h"

namespace tfm::internal::ops {
class PackedWeight;
}

namespace tfm::internal::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A parameter: f32, requires a gradient.
Tensor make_parameter(const Shape& shape);

// Where a module's parameters come from as it is built: fresh tensors (zeros, or `initial`) for
// init() to fill, or the tensors of a loaded model, adopted: each checked for presence, shape and
// dtype, then shared (no copy), so that building a loaded model costs nothing beyond reading it.
class ParameterSource {
 public:
  ParameterSource() = default;  // fresh parameters
  explicit ParameterSource(const NamedTensors& loaded);

  // The parameter `name` of `shape`, requiring a gradient.
  Tensor make(const std::string& name, const Shape& shape, float initial = 0.0f) const;
  bool adopting() const { return adopting_; }

 private:
  std::unordered_map<std::string, Tensor> loaded_;
  bool adopting_ = false;
};

// y = x W^T + b (torch.nn.Linear layout: weight [out, in]).
struct Linear {
  Linear() = default;
  // `name`: the prefix of its parameters' names ("...q_proj."), used when adopting.
  Linear(int64_t in, int64_t out, bool bias, const ParameterSource& source = {},
         const std::string& name = "");
  // Products in `precision` (f32 or bf16), with the packed weight when there is one. x_bf16: x's
  // bf16 copy when the caller shares one between products (ops::ProductOptions::x_bf16).
  Tensor forward(const Tensor& x, DType precision, const Tensor& x_bf16 = {}) const;
  // Xavier/Glorot uniform weights (as tensor2tensor and fairseq), zero bias.
  void init(std::mt19937_64& rng);
  void collect(const std::string& prefix, NamedTensors& out) const;
  // Packs the weight for inference products in `precision` (ops::pack_weight). The packed copy is
  // what inference multiplies with from then on: a packed module must not change its weight.
  void pack(DType precision);

  Tensor weight, bias;
  std::shared_ptr<const ops::PackedWeight> packed;  // null: not packed (training)
};

struct LayerNorm {
  LayerNorm() = default;
  LayerNorm(int64_t dim, float eps, const ParameterSource& source = {},
            const std::string& name = "");
  Tensor forward(const Tensor& x) const;
  void collect(const std::string& prefix, NamedTensors& out) const;

  Tensor weight, bias;
  float eps = 1e-5f;
};

// The FFN's activation (config "activation"): relu as in equation 2, or gelu / swish.
enum class Activation { relu, gelu, swish };
Activation activation_named(const std::string& name);  // "relu", "gelu", "swish"

// Position-wise feed-forward network: FFN(x) = max(0, x W1^T + b1) W2^T + b2 (equation 2), or
// with gelu or swish in place of max(0, .).
struct FeedForward {
  FeedForward() = default;
  FeedForward(int64_t d_model, int64_t d_ff, const ParameterSource& source = {},
              const std::string& name = "", Activation activation = Activation::relu);
  Tensor forward(const Tensor& x, DType precision) const;
  void init(std::mt19937_64& rng);
  void pack(DType precision);
  void collect(const std::string& prefix, NamedTensors& out) const;

  Linear fc1, fc2;
  Activation activation = Activation::relu;
};

// The sinusoidal table of section 3.5, `positions` rows from position `first` on (a row's values do
// not depend on the table it is in). `layout` (config "sinusoid", docs/MODEL_FORMAT.md
// "Sinusoids"): "interleaved" as in the paper, PE[pos, 2i] = sin(pos w_i), PE[pos, 2i+1] = cos(pos
// w_i) with w_i = 10000^(-2i/d); "halves", PE[pos, i] = sin(pos w_i), PE[pos, d/2 + i] = cos(pos
// w_i), the same w_i (HF MarianMT); "halves_t2t", the halves with w_i = exp(-i ln(10000) / (d/2 -
// 1)) (Marian, fairseq, tensor2tensor).
Tensor sinusoidal_positions(int64_t positions, int64_t d_model, int64_t first = 0,
                            const std::string& layout = "interleaved");

}  // namespace tfm::internal::nn
