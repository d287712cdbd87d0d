// Multi-head attention (section 3.2.2):
//   MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V
//   W_i^V).
// The h projections of each kind are one [h*d_k, d_model] matrix, so a head is a column block.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "tfm/nn/layers.h"
#include "tfm/ops/ops.h"

namespace tfm::nn {

struct MultiHeadAttention {
  MultiHeadAttention() = default;
  MultiHeadAttention(int64_t d_model, int heads, int64_t d_k, int64_t d_v, bool bias,
                     float attention_dropout);

  // query_input: [B, Tq, d_model]; memory: [B, Tk, d_model] (the same tensor for self-attention).
  Tensor forward(const Tensor& query_input, const Tensor& memory, const ops::AttentionMask& mask,
                 ForwardContext& ctx) const;
  void init(std::mt19937_64& rng);
  void collect(const std::string& prefix, NamedTensors& out) const;

  Linear q_proj, k_proj, v_proj, out_proj;
  int heads = 1;
  float attention_dropout = 0.0f;
};

}  // namespace tfm::nn
