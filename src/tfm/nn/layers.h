// Basic modules: each owns its parameters and composes ops; none has a backward of its own (the ops
// record theirs on the tape).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/nn/context.h"

namespace tfm::ops {
class PackedWeight;
}

namespace tfm::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A parameter: f32, requires a gradient.
Tensor make_parameter(const Shape& shape);

// y = x W^T + b (torch.nn.Linear layout: weight [out, in]).
struct Linear {
  Linear() = default;
  Linear(int64_t in, int64_t out, bool bias);
  // Products in `precision` (f32 or bf16), with the packed weight when there is one.
  Tensor forward(const Tensor& x, DType precision) const;
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
  LayerNorm(int64_t dim, float eps);
  Tensor forward(const Tensor& x) const;
  void collect(const std::string& prefix, NamedTensors& out) const;

  Tensor weight, bias;
  float eps = 1e-5f;
};

// Position-wise feed-forward network: FFN(x) = max(0, x W1^T + b1) W2^T + b2 (equation 2).
struct FeedForward {
  FeedForward() = default;
  FeedForward(int64_t d_model, int64_t d_ff);
  Tensor forward(const Tensor& x, DType precision) const;
  void init(std::mt19937_64& rng);
  void pack(DType precision);
  void collect(const std::string& prefix, NamedTensors& out) const;

  Linear fc1, fc2;
};

// The sinusoidal table of section 3.5, interleaved as in the paper:
// PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)).
Tensor sinusoidal_positions(int64_t positions, int64_t d_model);

}  // namespace tfm::nn
