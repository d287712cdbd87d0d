// Scaled dot-product attention on CUDA, with the shapes, masks and dropout of
// kernels/cpu/attention_cpu.h (its structs are reused; every pointer is a device pointer, the
// mask's key_lengths included). Training attention (attention_gemm_cuda.cc) is the CPU's
// algorithm: exact f32 cuBLASLt products over per-head views around our masked-softmax row kernels
// (attention_softmax_cuda.h), any head width. Decoding attention over a key/value cache
// (attention_cuda.cu) is flash style, one block per (batch, head, tile of queries) with an online
// softmax, for head widths dk and dv up to kMaxHeadDim.
#pragma once

#include <cstdint>

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

constexpr int64_t kMaxHeadDim = 128;

// As cpu::attention_forward: q: [B, Tq, h*dk], k: [B, Tk, h*dk], v: [B, Tk, h*dv], out: [B, Tq,
// h*dv]; probs: [B, h, Tq, Tk] receives P (0 on masked keys, before dropout), which the backward
// needs; dropped: [B, h, Tq, Tk] scratch for the dropped P, used only when dropout.p > 0.
void attention_forward(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                       const kernels::AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* dropped, float* out);

// As cpu::attention_backward, from the forward's P: d_out: [B, Tq, h*dv]; d_probs: [B, h, Tq, Tk]
// scratch (with dropout it holds the recomputed dropped P first, so no second one is needed).
// grads as for the CPU, written in its order v, q, k (nullptr: not needed).
void attention_backward(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                        const kernels::AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* probs, const float* d_out, float* d_probs,
                        const kernels::AttentionGrads& grads);

// Inference attention over a key/value cache as cpu::attention_forward_cached (kv's pointers and
// slot table on the device). kv_rows: the rows of the cache buffers; a slot outside [0, kv_rows)
// makes its rows' outputs NaN instead of reading outside the buffers. probs may be nullptr.
void attention_forward_cached(const kernels::AttentionDims& dims,
                              const kernels::AttentionMaskSpec& mask, const float* q,
                              const kernels::CachedKeyValues& kv, int64_t kv_rows, float* probs,
                              float* out);

}  // namespace tfm::internal::cuda
