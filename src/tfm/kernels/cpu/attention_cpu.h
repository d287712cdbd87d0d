// Scaled dot-product attention on the CPU, our own loops: training's forward and backward one
// (batch, head) tile at a time (attention_tiles_cpu.cc), inference over a key/value cache one query
// row at a time (attention_cpu.cc).
#pragma once

#include <algorithm>
#include <cstdint>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

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

// The argument structs (kernels/kernel_args.h).
using kernels::AttentionDims;
using kernels::AttentionDropout;
using kernels::AttentionGrads;
using kernels::AttentionMaskSpec;
using kernels::CachedKeyValues;

// q: [B, Tq, h*dk], k: [B, Tk, h*dk], v: [B, Tk, h*dv], out: [B, Tq, h*dv];
// probs: [B, h, Tq, Tk] receives P = softmax(q k^T / sqrt(dk) + mask) (0 on masked keys);
// dropped: [B, h, Tq, Tk] scratch for the dropped P, used only when dropout.p > 0.
void attention_forward(const AttentionDims& dims, const AttentionMaskSpec& mask,
                       const AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* dropped, float* out);

// Inference attention over a key/value cache (incremental decoding): the first dims.tk positions of
// each batch's keys and values, found through `kv`. q, probs and out are dense as in
// attention_forward; no dropout. Row loops instead of oneDNN products: with the few queries of a
// decoding step the products are tiny, and their shapes change every step, so a cached primitive
// per shape would cost more to create than the loop costs to run.
void attention_forward_cached(const AttentionDims& dims, const AttentionMaskSpec& mask,
                              const float* q, const CachedKeyValues& kv, float* probs, float* out);

// d_out: [B, Tq, h*dv]; d_probs: [B, h, Tq, Tk] scratch. The dropped weights are recomputed from
// the seed where they are used.
void attention_backward(const AttentionDims& dims, const AttentionMaskSpec& mask,
                        const AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* probs, const float* d_out, float* d_probs,
                        const AttentionGrads& grads);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
