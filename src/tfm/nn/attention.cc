#include "tfm/nn/attention.h"

namespace tfm::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int num_heads, int64_t d_k, int64_t d_v,
                                       bool bias, float dropout)
    : q_proj(d_model, num_heads * d_k, bias),
      k_proj(d_model, num_heads * d_k, bias),
      v_proj(d_model, num_heads * d_v, bias),
      out_proj(num_heads * d_v, d_model, bias),
      heads(num_heads),
      attention_dropout(dropout) {}

Tensor MultiHeadAttention::forward(const Tensor& query_input, const Tensor& memory,
                                   const ops::AttentionMask& mask, ForwardContext& ctx) const {
  Tensor q = q_proj.forward(query_input);
  Tensor k = k_proj.forward(memory);
  Tensor v = v_proj.forward(memory);
  float p = ctx.dropout(attention_dropout);
  Tensor heads_out = ops::attention(q, k, v, heads, mask, p, p > 0 ? ctx.next_seed() : 0);
  return out_proj.forward(heads_out);
}

void MultiHeadAttention::init(std::mt19937_64& rng) {
  q_proj.init(rng);
  k_proj.init(rng);
  v_proj.init(rng);
  out_proj.init(rng);
}

void MultiHeadAttention::collect(const std::string& prefix, NamedTensors& out) const {
  q_proj.collect(prefix + "q_proj.", out);
  k_proj.collect(prefix + "k_proj.", out);
  v_proj.collect(prefix + "v_proj.", out);
  out_proj.collect(prefix + "out_proj.", out);
}

}  // namespace tfm::nn
