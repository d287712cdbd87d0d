// Multi-head attention (section 3.2.2):
//   MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V
//   W_i^V).
// The h projections of each kind are one [h*d_k, d_model] matrix, so a head is a column block.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tfm/nn/layers.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::nn {

// Projected keys and values kept between the steps of incremental decoding (inference only).
// Positions [0, length) of every row hold projections; the buffers have room for capacity()
// positions and grow (copying) when an append would overflow them.
//
// Rows are reordered without copying keys or values: row r's position j lives in buffer row
// (slot) slots[r, j]. A step writes row r's new position into slot r: no other row refers to a
// position that has not been written yet, so the slot is free there. Beams that share a prefix
// then also share its cached projections.
struct KeyValueCache {
  Tensor keys;    // [buffer rows, capacity, h*dk], f32 or bf16
  Tensor values;  // [buffer rows, capacity, h*dv], of the keys' type
  Tensor slots;   // i32 [rows, capacity]; undefined: row r's positions are all in slot r
  int64_t length = 0;

  // An empty cache for `rows` rows with room for `capacity` positions, holding f32 or bf16, in
  // `device`'s memory (the slot table stays host bookkeeping).
  static KeyValueCache with_capacity(int64_t rows, int64_t capacity, int64_t key_width,
                                     int64_t value_width, DType dtype = DType::f32,
                                     Device device = Device::cpu);
  int64_t rows() const;
  int64_t capacity() const { return keys.defined() ? keys.dim(1) : 0; }
  // Appends k: [rows, n, h*dk] and v: [rows, n, h*dv] (f32; rounded to bf16 for a bf16 cache) at
  // positions [length, length + n).
  void append(const Tensor& k, const Tensor& v);
  // New row i continues old row rows[i] (indices may repeat). Rewrites the slot table only, unless
  // there are more new rows than buffer rows (then it copies, as gather).
  void reorder(const std::vector<int64_t>& rows);
  // A cache whose row i is a copy of row rows[i] of this one (indices may repeat), same capacity,
  // without a slot table.
  KeyValueCache gather(const std::vector<int64_t>& rows) const;
};

struct MultiHeadAttention {
  MultiHeadAttention() = default;
  MultiHeadAttention(int64_t d_model, int heads, int64_t d_k, int64_t d_v, bool bias,
                     float attention_dropout, const ParameterSource& source = {},
                     const std::string& name = "");

  // query_input: [B, Tq, d_model]; memory: [B, Tk, d_model] (the same tensor for self-attention).
  Tensor forward(const Tensor& query_input, const Tensor& memory, const ops::AttentionMask& mask,
                 ForwardContext& ctx) const;
  // ---- incremental decoding (inference: no tape may be recording) ----
  // Every product in `precision` (f32 or bf16), as ForwardContext::precision().
  // An empty cache of this attention's key and value widths, holding the product type: bf16 for
  // bf16 products (the attention products then read bf16 keys and values, as torch.autocast's bf16
  // matmuls do, and the cache's memory traffic halves).
  KeyValueCache empty_cache(int64_t rows, int64_t capacity, DType precision) const;
  // Projects input [rows, n, d_model] and appends its keys and values to the cache.
  void append(const Tensor& input, KeyValueCache& cache, DType precision) const;
  // Self-attention's decoding step: append(input, cache), then attend(input, cache, ...), the same
  // bits. With the three projections packed alike (inference only: a gradient to record is
  // refused), they run as one ops::packed_linears call: on the CPU with int8 weights, one
  // quantisation of the input and one parallel region.
  Tensor append_and_attend(const Tensor& input, KeyValueCache& cache,
                           const ops::AttentionMask& mask, DType precision,
                           Tensor* probs_out = nullptr) const;
  // out_proj(heads) for queries from query_input [rows, Tq, d_model] over the cache's `length`
  // positions. The mask as in forward (causal needs query_offset = position of the first query).
  // probs_out: the weights [rows, h, Tq, length].
  Tensor attend(const Tensor& query_input, const KeyValueCache& cache,
                const ops::AttentionMask& mask, DType precision, Tensor* probs_out = nullptr) const;

  void init(std::mt19937_64& rng);
  void pack(DType precision);  // every projection (Linear::pack)
  void collect(const std::string& prefix, NamedTensors& out) const;

  Linear q_proj, k_proj, v_proj, out_proj;
  int heads = 1;
  float attention_dropout = 0.0f;
};

}  // namespace tfm::internal::nn
