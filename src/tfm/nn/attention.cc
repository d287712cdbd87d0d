#include "tfm/nn/attention.h"

#include <algorithm>
#include <cstring>

#include "tfm/ops/autocast.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal::nn {

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int num_heads, int64_t d_k, int64_t d_v,
                                       bool bias, float dropout, const ParameterSource& source,
                                       const std::string& name)
    : q_proj(d_model, num_heads * d_k, bias, source, name + "q_proj."),
      k_proj(d_model, num_heads * d_k, bias, source, name + "k_proj."),
      v_proj(d_model, num_heads * d_v, bias, source, name + "v_proj."),
      out_proj(num_heads * d_v, d_model, bias, source, name + "out_proj."),
      heads(num_heads),
      attention_dropout(dropout) {}

Tensor MultiHeadAttention::forward(const Tensor& query_input, const Tensor& memory,
                                   const ops::AttentionMask& mask, ForwardContext& ctx) const {
  const DType precision = ctx.precision();
  // For bf16 products each input is rounded once: self-attention's three projections read one
  // copy, and every decoder layer's keys and values the context's copy of the encoder's output.
  // (An i8-packed weight quantises x itself.)
  const bool self_attention = query_input.same_storage(memory) &&
                              query_input.device_raw() == memory.device_raw() &&
                              query_input.shape() == memory.shape();
  const bool bf16_operands = !k_proj.packed || k_proj.packed->dtype() == DType::bf16;
  const Tensor query_bf16 = self_attention && bf16_operands ? ctx.bf16_copy(query_input) : Tensor{};
  const Tensor memory_bf16 = !bf16_operands   ? Tensor{}
                             : self_attention ? query_bf16
                                              : ctx.shared_bf16(memory);
  Tensor q = q_proj.forward(query_input, precision, query_bf16);
  Tensor k = k_proj.forward(memory, precision, memory_bf16);
  Tensor v = v_proj.forward(memory, precision, memory_bf16);
  float p = ctx.dropout(attention_dropout);
  std::vector<Tensor>* record = ctx.attention_record();
  Tensor probs;
  Tensor heads_out = ops::attention(q, k, v, heads, mask, p, p > 0 ? ctx.next_seed() : 0,
                                    record ? &probs : nullptr, precision);
  if (record) record->push_back(probs);
  return out_proj.forward(heads_out, precision);
}

KeyValueCache MultiHeadAttention::empty_cache(int64_t rows, int64_t capacity,
                                              DType precision) const {
  return KeyValueCache::with_capacity(rows, capacity, k_proj.weight.dim(0), v_proj.weight.dim(0),
                                      precision, k_proj.weight.device());
}

void MultiHeadAttention::append(const Tensor& input, KeyValueCache& cache, DType precision) const {
  cache.append(k_proj.forward(input, precision), v_proj.forward(input, precision));
}

Tensor MultiHeadAttention::append_and_attend(const Tensor& input, KeyValueCache& cache,
                                             const ops::AttentionMask& mask, DType precision,
                                             Tensor* probs_out) const {
  // Packed modules serve inference only (Linear::pack): the op refuses a gradient to record.
  bool together = true;
  for (const Linear* p : {&q_proj, &k_proj, &v_proj})
    together = together && p->packed && p->packed->dtype() == q_proj.packed->dtype();
  if (!together) {
    append(input, cache, precision);
    return attend(input, cache, mask, precision, probs_out);
  }
  const std::vector<Tensor> qkv =
      ops::packed_linears(input, {q_proj.packed.get(), k_proj.packed.get(), v_proj.packed.get()},
                          {q_proj.bias, k_proj.bias, v_proj.bias});
  cache.append(qkv[1], qkv[2]);
  Tensor heads_out = ops::attention_cached(qkv[0], cache.keys, cache.values, cache.length, heads,
                                           mask, probs_out, cache.slots);
  return out_proj.forward(heads_out, precision);
}

Tensor MultiHeadAttention::attend(const Tensor& query_input, const KeyValueCache& cache,
                                  const ops::AttentionMask& mask, DType precision,
                                  Tensor* probs_out) const {
  Tensor q = q_proj.forward(query_input, precision);
  Tensor heads_out = ops::attention_cached(q, cache.keys, cache.values, cache.length, heads, mask,
                                           probs_out, cache.slots);
  return out_proj.forward(heads_out, precision);
}

void MultiHeadAttention::init(std::mt19937_64& rng) {
  q_proj.init(rng);
  k_proj.init(rng);
  v_proj.init(rng);
  out_proj.init(rng);
}

void MultiHeadAttention::pack(DType precision) {
  q_proj.pack(precision);
  k_proj.pack(precision);
  v_proj.pack(precision);
  out_proj.pack(precision);
}

void MultiHeadAttention::collect(const std::string& prefix, NamedTensors& out) const {
  q_proj.collect(prefix + "q_proj.", out);
  k_proj.collect(prefix + "k_proj.", out);
  v_proj.collect(prefix + "v_proj.", out);
  out_proj.collect(prefix + "out_proj.", out);
}

KeyValueCache KeyValueCache::with_capacity(int64_t rows, int64_t capacity, int64_t key_width,
                                           int64_t value_width, DType dtype, Device device) {
  TFM_CHECK(rows >= 0 && capacity > 0, "key/value cache: {} rows with capacity {}", rows, capacity);
  TFM_CHECK(dtype == DType::f32 || dtype == DType::bf16,
            "key/value cache: {} elements are not supported (f32 or bf16)", dtype_name(dtype));
  KeyValueCache cache;
  cache.keys = Tensor::empty({rows, capacity, key_width}, dtype, device);
  cache.values = Tensor::empty({rows, capacity, value_width}, dtype, device);
  return cache;
}

int64_t KeyValueCache::rows() const {
  if (slots.defined()) return slots.dim(0);
  return keys.defined() ? keys.dim(0) : 0;
}

namespace {

std::vector<int64_t> identity_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) rows[static_cast<size_t>(r)] = r;
  return rows;
}

}  // namespace

void KeyValueCache::append(const Tensor& k, const Tensor& v) {
  TFM_CHECK(k.rank() == 3 && v.rank() == 3 && k.dim(0) == rows() && v.dim(0) == rows() &&
                k.dim(1) == v.dim(1) && k.dim(2) == keys.dim(2) && v.dim(2) == values.dim(2) &&
                k.dtype() == DType::f32 && v.dtype() == DType::f32,
            "key/value cache {} / {}: cannot append k {} and v {}", keys.describe(),
            values.describe(), k.describe(), v.describe());
  const int64_t n = k.dim(1);
  if (length + n > capacity()) {
    // Doubling keeps the copies of a long decode linear in its length. Every buffer row is copied
    // as it is (the slot table stays valid), then the table is widened.
    const int64_t grown = std::max(2 * capacity(), length + n);
    KeyValueCache bigger =
        with_capacity(keys.dim(0), grown, keys.dim(2), values.dim(2), keys.dtype(), keys.device());
    const std::vector<int64_t> all = identity_rows(keys.dim(0));
    ops::cache_gather(keys, Tensor(), all, length, bigger.keys);
    ops::cache_gather(values, Tensor(), all, length, bigger.values);
    keys = bigger.keys;
    values = bigger.values;
    if (slots.defined()) {
      Tensor wider = Tensor::empty({slots.dim(0), grown}, DType::i32);
      for (int64_t r = 0; r < slots.dim(0); ++r)
        std::memcpy(wider.data<int32_t>() + r * grown, slots.data<int32_t>() + r * slots.dim(1),
                    static_cast<size_t>(length) * sizeof(int32_t));
      slots = wider;
    }
  }
  // Row r's new positions go to slot r (see the struct's comment).
  auto write = [&](const Tensor& src, Tensor& dst) {
    // One conversion of the whole input (not one per row: each is a parallel region to open).
    const Tensor typed = dst.dtype() == DType::bf16 ? ops::to_bf16(src) : src;
    ops::cache_write(dst, typed, length);
  };
  write(k, keys);
  write(v, values);
  if (slots.defined()) {
    int32_t* table = slots.data<int32_t>();
    for (int64_t r = 0; r < rows(); ++r)
      for (int64_t j = length; j < length + n; ++j)
        table[r * slots.dim(1) + j] = static_cast<int32_t>(r);
  }
  length += n;
}

void KeyValueCache::reorder(const std::vector<int64_t>& rows_to_keep) {
  for (int64_t r : rows_to_keep)
    TFM_CHECK(r >= 0 && r < rows(), "key/value cache: row {} selected from {} rows", r, rows());
  const auto n = static_cast<int64_t>(rows_to_keep.size());
  if (n > keys.dim(0)) {
    // Appending writes row i into slot i: more rows than slots need bigger buffers.
    *this = gather(rows_to_keep);
    return;
  }
  const int64_t cap = capacity();
  Tensor table = Tensor::empty({n, cap}, DType::i32);
  int32_t* to = table.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t from_row = rows_to_keep[static_cast<size_t>(i)];
    int32_t* row = to + i * cap;
    if (slots.defined()) {
      std::memcpy(row, slots.data<int32_t>() + from_row * cap,
                  static_cast<size_t>(length) * sizeof(int32_t));
    } else {
      std::fill(row, row + length, static_cast<int32_t>(from_row));
    }
  }
  slots = table;
}

KeyValueCache KeyValueCache::gather(const std::vector<int64_t>& rows_to_keep) const {
  for (int64_t r : rows_to_keep)
    TFM_CHECK(r >= 0 && r < rows(), "key/value cache: row {} selected from {} rows", r, rows());
  KeyValueCache out = with_capacity(static_cast<int64_t>(rows_to_keep.size()), capacity(),
                                    keys.dim(2), values.dim(2), keys.dtype(), keys.device());
  ops::cache_gather(keys, slots, rows_to_keep, length, out.keys);
  ops::cache_gather(values, slots, rows_to_keep, length, out.values);
  out.length = length;
  return out;
}

}  // namespace tfm::internal::nn
