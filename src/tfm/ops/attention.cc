// ops::attention: shape and mask checks, then the device's attention backend (the CPU's,
// kernels/cpu/attention_cpu.h, carry the gradient formulas in their comments; every backend runs
// the same algorithm on the same buffers). The backward keeps P and the dropout seed (the dropped
// weights are recomputed from the seed). For bf16 training a backend with fused kernels (CUDA's)
// keeps one log-sum-exp a query row instead of P and recomputes P in the backward.
#include "tfm/autograd/tape.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

namespace {

using detail::KernelTable;
using kernels::AttentionDims;
using kernels::AttentionMaskSpec;

// `keys` < 0: every position of k and v is a key; otherwise only the first `keys` are. `slotted`:
// k and v are the rows of a slot table (any number of them), not one per batch of q.
// `bf16_kv`: k and v may also both be bf16 (attention_cached).
AttentionDims check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                              const AttentionMask& mask, float dropout_p, int64_t keys = -1,
                              bool slotted = false, bool bf16_kv = false) {
  TFM_CHECK(q.defined() && k.defined() && v.defined(), "attention: an input is undefined");
  const bool kv_ok =
      k.dtype() == v.dtype() && (k.dtype() == DType::f32 || (bf16_kv && k.dtype() == DType::bf16));
  TFM_CHECK(q.dtype() == DType::f32 && kv_ok, "attention: q {}, k {}, v {} must be f32{}",
            q.describe(), k.describe(), v.describe(), bf16_kv ? " (k and v: or both bf16)" : "");
  TFM_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3,
            "attention: q {}, k {}, v {} must be [B, T, h*d]", q.describe(), k.describe(),
            v.describe());
  TFM_CHECK(heads > 0, "attention: {} heads", heads);
  TFM_CHECK((slotted || q.dim(0) == k.dim(0)) && k.dim(0) == v.dim(0) && k.dim(1) == v.dim(1),
            "attention: q {}, k {}, v {} disagree on batch or key length", q.describe(),
            k.describe(), v.describe());
  TFM_CHECK(
      q.dim(2) == k.dim(2) && q.dim(2) % heads == 0 && v.dim(2) % heads == 0,
      "attention: q {} and k {} need equal widths, and they and v {} must split into {} heads",
      q.describe(), k.describe(), v.describe(), heads);
  AttentionDims dims;
  dims.batch = q.dim(0);
  dims.heads = heads;
  dims.tq = q.dim(1);
  dims.tk = k.dim(1);
  if (keys >= 0) {
    TFM_CHECK(keys <= dims.tk,
              "attention_cached: {} keys requested from a cache k {} of {} positions", keys,
              k.describe(), dims.tk);
    dims.tk = keys;
  }
  dims.dk = q.dim(2) / heads;
  dims.dv = v.dim(2) / heads;
  TFM_CHECK(dims.tk > 0 && dims.dk > 0, "attention: k {} has no keys or q {} has zero width",
            k.describe(), q.describe());
  if (!mask.key_lengths.empty()) {
    TFM_CHECK(static_cast<int64_t>(mask.key_lengths.size()) == dims.batch,
              "attention: {} key lengths for a batch of {}", mask.key_lengths.size(), dims.batch);
    for (size_t b = 0; b < mask.key_lengths.size(); ++b) {
      TFM_CHECK(mask.key_lengths[b] >= 1 && mask.key_lengths[b] <= dims.tk,
                "attention: key length {} of sentence {} is outside [1, {}] (k {})",
                mask.key_lengths[b], b, dims.tk, k.describe());
    }
  }
  TFM_CHECK(mask.query_offset >= 0, "attention: negative causal query offset {}",
            mask.query_offset);
  TFM_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, "attention: dropout {} is outside [0, 1)",
            dropout_p);
  return dims;
}

// The backend read the key lengths where they run: on a device with memory of its own a device
// copy (queued on the stream; the host does not wait); undefined in host memory or without key
// lengths.
Tensor device_key_lengths(const AttentionMask& mask, const KernelTable& backend, Device device) {
  if (backend.host_memory || mask.key_lengths.empty()) return Tensor();
  return Tensor::from_ints({static_cast<int64_t>(mask.key_lengths.size())}, mask.key_lengths)
      .to(device);
}

AttentionMaskSpec mask_spec(const AttentionMask& mask, const Tensor& key_lengths) {
  const int32_t* lengths = nullptr;
  if (key_lengths.defined()) {
    lengths = key_lengths.device_data<int32_t>();
  } else if (!mask.key_lengths.empty()) {
    lengths = mask.key_lengths.data();
  }
  return {lengths, mask.causal, mask.query_offset};
}

void check_head_dims(const char* op, const AttentionDims& dims, const KernelTable& backend) {
  const int64_t limit = backend.max_head_dim;
  TFM_CHECK(limit == 0 || (dims.dk <= limit && dims.dv <= limit),
            "{}: heads of width dk = {}, dv = {}; the {} backend take at most {}", op, dims.dk,
            dims.dv, backend.name, limit);
}

// The gradient targets of q, k and v, in the kernels' write order (v, q, k), so that a tensor
// passed twice accumulates.
kernels::AttentionGrads attention_grads(const Tensor& q, const Tensor& k, const Tensor& v) {
  kernels::AttentionGrads grads;
  GradTarget target;
  if (v.requires_grad()) {
    target = grad_target(v);
    grads.dv = target.tensor.device_data<float>();
    grads.accumulate_v = target.accumulate;
  }
  if (q.requires_grad()) {
    target = grad_target(q);
    grads.dq = target.tensor.device_data<float>();
    grads.accumulate_q = target.accumulate;
  }
  if (k.requires_grad()) {
    target = grad_target(k);
    grads.dk = target.tensor.device_data<float>();
    grads.accumulate_k = target.accumulate;
  }
  return grads;
}

// The backend's attention_forward and attention_backward: P [B, h, Tq, Tk] kept for the backward.
Tensor attention_keeping_probs(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionDims& dims, const AttentionMask& mask,
                               const kernels::AttentionDropout& dropout, Device device,
                               Tensor* probs_out) {
  const KernelTable& backend = detail::kernels_for("attention", device);
  const float dropout_p = dropout.p;

  // P [B, h, Tq, Tk], kept for the backward; the dropped weights only for the forward's product.
  Tensor probs = Tensor::empty({dims.batch, dims.heads, dims.tq, dims.tk}, DType::f32, device);
  Tensor out = Tensor::empty({dims.batch, dims.tq, dims.heads * dims.dv}, DType::f32, device);
  Tensor dropped;
  if (dropout_p > 0.0f) dropped = Tensor::empty(probs.shape(), DType::f32, device);
  const Tensor key_lengths = device_key_lengths(mask, backend, device);
  detail::entry("attention", device, backend.attention_forward)(
      dims, mask_spec(mask, key_lengths), dropout, q.device_data<float>(), k.device_data<float>(),
      v.device_data<float>(), probs.device_data<float>(), detail::data_or_null<float>(dropped),
      out.device_data<float>());
  bool record = needs_grad({&q, &k, &v});
  // While recording, the backward owns P: the caller gets a copy it may change.
  if (probs_out) *probs_out = record ? probs.clone() : probs;
  if (!record) return out;

  // The mask's key lengths are copied: the caller's AttentionMask may not outlive the tape.
  // The closure's copy of `out` must share its autograd record, which this creates.
  out.set_requires_grad(true);
  record_backward(out, [q, k, v, out, probs, dims, dropout, mask, key_lengths, device]() {
    Tensor g = out.grad();
    if (!g.defined()) return;
    const kernels::AttentionGrads grads = attention_grads(q, k, v);
    const KernelTable& kernels = detail::kernels_for("attention", device);
    // The backends recompute the dropped weights from the seed (CUDA into d_probs, the CPU where
    // it uses each), so the backward needs no copy of the forward's.
    Tensor d_probs = Tensor::empty(probs.shape(), DType::f32, device);
    detail::entry("attention", device, kernels.attention_backward)(
        dims, mask_spec(mask, key_lengths), dropout, q.device_data<float>(), k.device_data<float>(),
        v.device_data<float>(), probs.device_data<float>(), g.device_data<float>(),
        d_probs.device_data<float>(), grads);
  });
  return out;
}

// The backend's fused kernels: bf16 products, no P; the backward recomputes it from each query
// row's log-sum-exp.
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionDims& dims,
                       const AttentionMask& mask, const kernels::AttentionDropout& dropout,
                       Device device) {
  const KernelTable& backend = detail::kernels_for("attention", device);
  Tensor out = Tensor::empty({dims.batch, dims.tq, dims.heads * dims.dv}, DType::f32, device);
  Tensor lse = Tensor::empty({dims.batch, dims.heads, dims.tq}, DType::f32, device);
  const Tensor key_lengths = device_key_lengths(mask, backend, device);
  backend.fused_attention_forward(
      dims, mask_spec(mask, key_lengths), dropout, q.device_data<float>(), k.device_data<float>(),
      v.device_data<float>(), lse.device_data<float>(), out.device_data<float>());
  out.set_requires_grad(true);
  record_backward(out, [q, k, v, out, lse, dims, dropout, mask, key_lengths, device]() {
    Tensor g = out.grad();
    if (!g.defined()) return;
    const kernels::AttentionGrads grads = attention_grads(q, k, v);
    const KernelTable& kernels = detail::kernels_for("attention", device);
    Tensor delta =
        detail::workspace(kernels.fused_attention_backward_workspace, DType::f32, device, dims);
    kernels.fused_attention_backward(
        dims, mask_spec(mask, key_lengths), dropout, q.device_data<float>(), k.device_data<float>(),
        v.device_data<float>(), out.device_data<float>(), lse.device_data<float>(),
        g.device_data<float>(), detail::data_or_null<float>(delta), grads);
  });
  return out;
}

// Whether ops::attention takes the fused kernels: bf16 products asked for, a backward to record
// (they save P's memory; inference keeps the exact path), no probabilities wanted, three distinct
// inputs (the fused backward's writes are not ordered for q aliasing k or v), and dims the
// backend's kernels take.
bool use_fused(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionDims& dims,
               const KernelTable& backend, DType precision, bool record, const Tensor* probs_out) {
  return precision == DType::bf16 && record && probs_out == nullptr &&
         backend.fused_attention_forward != nullptr && backend.fused_attention_supports(dims) &&
         q.device_raw() != k.device_raw() && q.device_raw() != v.device_raw() &&
         k.device_raw() != v.device_raw();
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                 const AttentionMask& mask, float dropout_p, uint64_t seed, Tensor* probs_out,
                 DType precision) {
  const AttentionDims dims = check_attention(q, k, v, heads, mask, dropout_p);
  TFM_CHECK(precision == DType::f32 || precision == DType::bf16,
            "attention: products in {} are not supported (f32 or bf16)", dtype_name(precision));
  const kernels::AttentionDropout dropout{dropout_p, seed};
  const Device device = detail::op_device("attention", q, k, v);
  const KernelTable& backend = detail::kernels_for("attention", device);
  if (use_fused(q, k, v, dims, backend, precision, needs_grad({&q, &k, &v}), probs_out))
    return fused_attention(q, k, v, dims, mask, dropout, device);
  return attention_keeping_probs(q, k, v, dims, mask, dropout, device, probs_out);
}

Tensor attention_cached(const Tensor& q, const Tensor& k, const Tensor& v, int64_t keys, int heads,
                        const AttentionMask& mask, Tensor* probs_out, const Tensor& slots) {
  const bool slotted = slots.defined();
  AttentionDims dims = check_attention(q, k, v, heads, mask, 0.0f, keys, slotted, true);
  TFM_CHECK(!needs_grad({&q, &k, &v}),
            "attention_cached: inference only, but an input requires a gradient while a tape is "
            "recording");
  const Device device = detail::op_device("attention_cached", q, k, v);
  const KernelTable& backend = detail::kernels_for("attention_cached", device);
  check_head_dims("attention_cached", dims, backend);
  // The slot table is host bookkeeping of the decoder: on the CPU, or on the device of q (where it
  // is not checked on the host; the kernel turns an out-of-range slot into NaN outputs).
  Tensor device_slots;
  if (slotted) {
    TFM_CHECK(slots.dtype() == DType::i32 && slots.rank() == 2 && slots.dim(0) == dims.batch &&
                  slots.dim(1) >= dims.tk,
              "attention_cached: slots {} must be i32 [{}, >= {}] (q {})", slots.describe(),
              dims.batch, dims.tk, q.describe());
    if (slots.device() == Device::cpu) {
      const int32_t* table = slots.data<int32_t>();
      for (int64_t b = 0; b < dims.batch; ++b)
        for (int64_t j = 0; j < dims.tk; ++j) {
          const int32_t slot = table[b * slots.dim(1) + j];
          TFM_CHECK(
              slot >= 0 && slot < k.dim(0),
              "attention_cached: slot {} of batch {}, position {} is outside the {} rows of k {}",
              slot, b, j, k.dim(0), k.describe());
        }
    } else {
      detail::op_device("attention_cached", q, slots);
    }
    device_slots = slots.to(device);  // queued on the stream; the host does not wait
  }
  Tensor probs;
  if (backend.cached_attention_needs_probs || probs_out)
    probs = Tensor::empty({dims.batch, dims.heads, dims.tq, dims.tk}, DType::f32, device);
  Tensor out = Tensor::empty({dims.batch, dims.tq, dims.heads * dims.dv}, DType::f32, device);
  const Tensor key_lengths = device_key_lengths(mask, backend, device);
  // Row b of k and v starts capacity positions after row b - 1.
  const int64_t capacity = k.dim(1);
  kernels::CachedKeyValues kv;
  kv.dtype = k.dtype();
  kv.k = k.device_raw();
  kv.k_batch_stride = capacity * k.dim(2);
  kv.v = v.device_raw();
  kv.v_batch_stride = capacity * v.dim(2);
  if (slotted) {
    kv.slots = device_slots.device_data<int32_t>();
    kv.slots_stride = slots.dim(1);
  }
  detail::entry("attention_cached", device, backend.attention_forward_cached)(
      dims, mask_spec(mask, key_lengths), q.device_data<float>(), kv, k.dim(0),
      detail::data_or_null<float>(probs), out.device_data<float>());
  if (probs_out) *probs_out = probs;
  return out;
}

}  // namespace tfm::internal::ops
