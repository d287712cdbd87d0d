// Scaled dot-product attention on the CPU: the products are strided oneDNN matmuls over per-head
// views of the [B, T, h*d] projections (no copies), the masked softmax and its backward are our
// own row loops.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tfm/core/dtype.h"

namespace tfm::cpu {

// ---- the attention-dropout mask: a pure function of (seed, element index) ----
// Its own names: dropout_cpu.h's mask (residual dropout) hashes differently, and two inline
// functions of one name with different bodies broke the one-definition rule: where a call was not
// inlined (at -O0) the linker kept one body for both, and the masks changed (the CUDA kernels
// mirror each one bit for bit).

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits, from a hash of the seed and the element index.
inline float attention_dropout_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(splitmix64(splitmix64(seed) ^ index) >> 40) * 0x1p-24f;
}

// The element is kept (and scaled by 1/(1-p)) when its uniform draw is at least p.
inline bool attention_dropout_keep(uint64_t seed, uint64_t index, float p) {
  return attention_dropout_uniform(seed, index) >= p;
}

// ---- shapes and masks ----

struct AttentionDims {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, dk = 0, dv = 0;
  int64_t prob_count() const { return batch * heads * tq * tk; }
};

// Both masks hide a suffix of each row: query t of batch b sees keys [0, visible_keys(b, t)).
struct AttentionMaskSpec {
  const int32_t* key_lengths = nullptr;  // [batch], or nullptr: every key is real
  bool causal = false;
  int64_t query_offset = 0;

  int64_t visible_keys(int64_t b, int64_t t, int64_t tk) const {
    int64_t n = key_lengths ? key_lengths[b] : tk;
    if (causal) n = std::min(n, t + query_offset + 1);
    return n;
  }
};

// Dropout on the attention weights; element (b, head, t, j) of P has index ((b*h + head)*Tq + t)*Tk
// + j.
struct AttentionDropout {
  float p = 0.0f;
  uint64_t seed = 0;
};

// q: [B, Tq, h*dk], k: [B, Tk, h*dk], v: [B, Tk, h*dv], out: [B, Tq, h*dv];
// probs: [B, h, Tq, Tk] receives P = softmax(q k^T / sqrt(dk) + mask) (0 on masked keys);
// dropped: [B, h, Tq, Tk] scratch for the dropped P, used only when dropout.p > 0.
void attention_forward(const AttentionDims& dims, const AttentionMaskSpec& mask,
                       const AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* dropped, float* out);

// Where an incremental decoder keeps the keys and values of batch b (kernel of
// ops::attention_cached): position j of batch b is in row r = slots ? slots[b * slots_stride + j] :
// b of [rows, capacity, h*d] buffers, i.e. its key starts at k + r * k_batch_stride + j * h*dk
// (values likewise). The slot table lets beam search reorder its hypotheses by rewriting indices
// instead of copying the caches.
struct CachedKeyValues {
  DType dtype =
      DType::f32;  // of k and v: f32 or bf16 (read as f32; the products accumulate in f32)
  const void* k = nullptr;
  int64_t k_batch_stride = 0;
  const void* v = nullptr;
  int64_t v_batch_stride = 0;
  const int32_t* slots = nullptr;
  int64_t slots_stride = 0;
};

// Inference attention over a key/value cache (incremental decoding): the first dims.tk positions of
// each batch's keys and values, found through `kv`. q, probs and out are dense as in
// attention_forward; no dropout. Row loops instead of oneDNN products: with the few queries of a
// decoding step the products are tiny, and their shapes change every step, so a cached primitive
// per shape would cost more to create than the loop costs to run.
void attention_forward_cached(const AttentionDims& dims, const AttentionMaskSpec& mask,
                              const float* q, const CachedKeyValues& kv, float* probs, float* out);

// Where the backward writes each gradient (nullptr: not needed), and whether it adds to what the
// buffer holds. The kernel writes dv, then dq, then dk: targets must be taken in that order so
// that one tensor passed as several inputs accumulates correctly.
struct AttentionGrads {
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  bool accumulate_q = false, accumulate_k = false, accumulate_v = false;
};

// d_out: [B, Tq, h*dv]; d_probs: [B, h, Tq, Tk] scratch; dropped: [B, h, Tq, Tk] scratch used only
// when dropout.p > 0.
void attention_backward(const AttentionDims& dims, const AttentionMaskSpec& mask,
                        const AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* probs, const float* d_out, float* d_probs,
                        float* dropped, const AttentionGrads& grads);

}  // namespace tfm::cpu
