// The Transformer of section 3: encoder and decoder stacks of N layers, post-norm residual blocks
// (pre-norm as an option), one embedding matrix shared by both embeddings and the pre-softmax
// projection, scaled by sqrt(d_model), and sinusoidal (or learned) positions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfm/model/config.h"
#include "tfm/nn/attention.h"
#include "tfm/nn/batch.h"
#include "tfm/nn/layers.h"

namespace tfm::nn {

// x -> x + Dropout(Sublayer(x)) with the LayerNorm after (post-norm, the paper's) or before
// (pre-norm).
struct ResidualNorm {
  LayerNorm norm;
  bool pre_norm = false;
  float dropout = 0.0f;

  template <typename Sublayer>
  Tensor apply(const Tensor& x, ForwardContext& ctx, Sublayer&& sublayer) const;
};

struct EncoderLayer {
  EncoderLayer(const ModelConfig& config);
  Tensor forward(const Tensor& x, const ops::AttentionMask& source_mask, ForwardContext& ctx) const;
  void init(std::mt19937_64& rng);
  void collect(const std::string& prefix, NamedTensors& out) const;

  MultiHeadAttention self_attn;
  ResidualNorm self_attn_block;
  FeedForward ffn;
  ResidualNorm ffn_block;
};

struct DecoderLayer {
  DecoderLayer(const ModelConfig& config);
  Tensor forward(const Tensor& y, const Tensor& memory, const ops::AttentionMask& self_mask,
                 const ops::AttentionMask& source_mask, ForwardContext& ctx) const;
  void init(std::mt19937_64& rng);
  void collect(const std::string& prefix, NamedTensors& out) const;

  MultiHeadAttention self_attn;
  ResidualNorm self_attn_block;
  MultiHeadAttention cross_attn;
  ResidualNorm cross_attn_block;
  FeedForward ffn;
  ResidualNorm ffn_block;
};

class Transformer {
 public:
  explicit Transformer(const ModelConfig& config);

  // Random initialisation from a seed: Glorot-uniform projections, N(0, d_model^-0.5) embeddings
  // (so that the sqrt(d_model) scaling gives unit variance), LayerNorm 1/0, zero biases.
  void init(uint64_t seed);
  // Copies values from named tensors (shapes must match; every parameter must be present).
  void load(const NamedTensors& values);

  const ModelConfig& config() const { return config_; }
  // (name, tensor) in the documented order (docs/MODEL_FORMAT.md).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;

  // Encoder output [B, S, d_model].
  Tensor encode(const Tensor& src, const std::vector<int32_t>& src_lengths,
                ForwardContext& ctx) const;
  // Decoder output before the projection, [B, T, d_model].
  Tensor decode(const Tensor& tgt_in, const Tensor& memory, const std::vector<int32_t>& src_lengths,
                ForwardContext& ctx) const;
  // Pre-softmax logits h E^T, [..., V].
  Tensor output_logits(const Tensor& hidden) const;

  Tensor forward(const Batch& batch, ForwardContext& ctx) const;
  // Label-smoothed cross-entropy of the batch's targets (config's label_smoothing, pad ignored).
  ops::CrossEntropyResult loss(const Batch& batch, ForwardContext& ctx,
                               double normalizer = 0.0) const;

 private:
  // dropout(E[ids] * sqrt(d_model) + positions)
  Tensor embed(const Tensor& ids, const Tensor& positions, ForwardContext& ctx) const;
  const Tensor& position_table(const Tensor& learned, int64_t length) const;

  ModelConfig config_;
  Tensor embedding_;
  Tensor encoder_positions_, decoder_positions_;  // learned only
  mutable Tensor sinusoids_;                      // grown on demand
  std::vector<EncoderLayer> encoder_layers_;
  std::vector<DecoderLayer> decoder_layers_;
  LayerNorm encoder_final_norm_, decoder_final_norm_;  // pre-norm only
};

}  // namespace tfm::nn
