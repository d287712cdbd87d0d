// Fused training attention on the tensor cores (flash style): softmax(q k^T / sqrt(d)) v with bf16
// operands and f32 accumulation, the masks and attention dropout of attention_cuda.h, without ever
// storing P [B, h, Tq, Tk]. The forward keeps one f32 per query row (the log-sum-exp of its
// scores); the backward recomputes P from it, tile by tile. Used by ops::attention for bf16
// training (the exact path, attention_gemm_cuda.cc, stays for f32 and for head widths the kernels
// do not take). Shapes as attention_cuda.h: q [B, Tq, h*d], k and v [B, Tk, h*d], out [B, Tq, h*d];
// every pointer is a device pointer.
#pragma once

#include <cstdint>

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

// Whether the kernels take these shapes: dk == dv in {16, 32, 64}. TFM_CUDA_FUSED_ATTENTION=0 in
// the environment turns them off (the exact path then runs: for measuring one against the other).
bool fused_attention_supports(const kernels::AttentionDims& dims);

// out = attention; lse [B, h, Tq]: each row's log2-sum-exp2 of its scaled scores (log2 e / sqrt(d)
// q k^T), +inf for a row without a visible key (whose output is 0, as on the CPU).
void fused_attention_forward(const kernels::AttentionDims& dims,
                             const kernels::AttentionMaskSpec& mask,
                             const kernels::AttentionDropout& dropout, const float* q,
                             const float* k, const float* v, float* lse, float* out);

// Floats of scratch the backward needs: delta [B, h, Tq].
int64_t fused_attention_backward_workspace(const kernels::AttentionDims& dims);

// The gradients from the forward's out and lse: delta_i = dO_i . O_i, then (per tile, P recomputed)
// dP = dO v^T, dS = P (dP keep / (1 - p) - delta), dq = dS k / sqrt(d), dk = dS^T q / sqrt(d),
// dv = (P keep / (1 - p))^T dO. Each gradient is written (or added, by grads' flags) once, dq
// first, then dv, then dk of the same elements by the same thread, so one tensor passed as k and v
// accumulates; q aliasing k or v is the caller's to avoid (ops::attention takes the exact path).
void fused_attention_backward(const kernels::AttentionDims& dims,
                              const kernels::AttentionMaskSpec& mask,
                              const kernels::AttentionDropout& dropout, const float* q,
                              const float* k, const float* v, const float* out, const float* lse,
                              const float* d_out, float* workspace,
                              const kernels::AttentionGrads& grads);

}  // namespace tfm::internal::cuda
