// Scaled dot-product attention on CUDA, flash style: one block per (batch, head, tile of queries)
// walks the keys in tiles held in shared memory with an online softmax, so the [B, h, Tq, Tk]
// weights are never stored unless asked for. The shapes, masks and dropout are those of
// kernels/cpu/attention_cpu.h (its structs are reused; every pointer is a device pointer, the
// mask's key_lengths included). Head widths dk and dv up to kMaxHeadDim.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/attention_cpu.h"

namespace tfm::cuda {

constexpr int64_t kMaxHeadDim = 128;

// q: [B, Tq, h*dk], k: [B, Tk, h*dk], v: [B, Tk, h*dv], out: [B, Tq, h*dv];
// lse: [B, h, Tq] receives log sum_j exp(S_j) over the visible keys of each row (S = q k^T /
// sqrt(dk)), which the backward needs to recompute P. probs (nullptr: not needed): [B, h, Tq, Tk]
// receives P before dropout (0 on masked keys), as the CPU's probs.
void attention_forward(const cpu::AttentionDims& dims, const cpu::AttentionMaskSpec& mask,
                       const cpu::AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* lse, float* out);

// The gradients of attention_forward, recomputing P from q, k and lse. out and lse are the
// forward's; delta: [B, h, Tq] scratch (delta_i = dO_i . O_i). grads as for the CPU (nullptr: not
// needed; the accumulate flags follow the CPU's write order v, q, k for a tensor passed twice).
// Deterministic: dq in one pass over query tiles, dk and dv in another over key tiles.
void attention_backward(const cpu::AttentionDims& dims, const cpu::AttentionMaskSpec& mask,
                        const cpu::AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* out, const float* lse, const float* d_out,
                        float* delta, const cpu::AttentionGrads& grads);

// Inference attention over a key/value cache as cpu::attention_forward_cached (kv's pointers and
// slot table on the device). kv_rows: the rows of the cache buffers; a slot outside [0, kv_rows)
// makes its rows' outputs NaN instead of reading outside the buffers. probs may be nullptr.
void attention_forward_cached(const cpu::AttentionDims& dims, const cpu::AttentionMaskSpec& mask,
                              const float* q, const cpu::CachedKeyValues& kv, int64_t kv_rows,
                              float* probs, float* out);

}  // namespace tfm::cuda
