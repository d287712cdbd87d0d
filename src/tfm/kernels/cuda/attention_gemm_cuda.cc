// Training attention on CUDA (attention_cuda.h): the steps of kernels/cpu/attention_cpu.cc, whose
// comments derive them, with its products on cuBLASLt over the same per-head views (exact f32: the
// results match the CPU's to rounding) and the row work in attention_softmax_cuda.h.
#include <cmath>

#include "tfm/kernels/cuda/attention_cuda.h"
#include "tfm/kernels/cuda/attention_softmax_cuda.h"
#include "tfm/kernels/cuda/matmul_cuda.h"

namespace tfm::internal::cuda {

namespace {

// Head `i` of a [B, T, h*d] projection as the 4-D view [B, h, T, d]: no copy, only strides (the
// batch dims do not fold, so gemm runs one batched product over B per head).
kernels::GemmOperand head_view(const float* data, int64_t batch, int64_t heads, int64_t t,
                               int64_t d) {
  return kernels::GemmOperand::strided(data, DType::f32, {batch, heads, t, d},
                                       {t * heads * d, d, heads * d, 1});
}

kernels::GemmOperand probs_view(const float* data, const kernels::AttentionDims& dims) {
  return kernels::GemmOperand::dense(data, DType::f32, {dims.batch, dims.heads, dims.tq, dims.tk});
}

void run_gemm(const kernels::GemmOperand& a, const kernels::GemmOperand& b,
              const kernels::GemmOperand& c, float alpha, bool accumulate) {
  kernels::GemmArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  args.alpha = alpha;
  args.accumulate = accumulate;
  gemm(args, /*allow_tf32=*/false);
}

float score_scale(const kernels::AttentionDims& dims) {
  return 1.0f / std::sqrt(static_cast<float>(dims.dk));
}

}  // namespace

void attention_forward(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                       const kernels::AttentionDropout& dropout, const float* q, const float* k,
                       const float* v, float* probs, float* dropped, float* out) {
  const int64_t B = dims.batch, h = dims.heads;
  // S = q k^T / sqrt(dk) into probs, then P = masked softmax(S) in place (and D when dropping).
  run_gemm(head_view(q, B, h, dims.tq, dims.dk), head_view(k, B, h, dims.tk, dims.dk).transposed(),
           probs_view(probs, dims), score_scale(dims), false);
  const bool has_dropout = dropout.p > 0.0f;
  attention_softmax(dims, mask, dropout, probs, has_dropout ? dropped : nullptr);
  // O = D v (D = P without dropout), written straight into the heads-concatenated [B, Tq, h*dv].
  run_gemm(probs_view(has_dropout ? dropped : probs, dims), head_view(v, B, h, dims.tk, dims.dv),
           head_view(out, B, h, dims.tq, dims.dv), 1.0f, false);
}

void attention_backward(const kernels::AttentionDims& dims, const kernels::AttentionMaskSpec& mask,
                        const kernels::AttentionDropout& dropout, const float* q, const float* k,
                        const float* v, const float* probs, const float* d_out, float* d_probs,
                        const kernels::AttentionGrads& grads) {
  const int64_t B = dims.batch, h = dims.heads;
  const kernels::GemmOperand d_out_heads = head_view(d_out, B, h, dims.tq, dims.dv);
  // O = D v:  dv = D^T dO, with D recomputed into d_probs (free until dD) when dropping.
  if (grads.dv) {
    const float* weights = probs;
    if (dropout.p > 0.0f) {
      attention_dropout(dims, dropout, probs, d_probs);
      weights = d_probs;
    }
    run_gemm(probs_view(weights, dims).transposed(), d_out_heads,
             head_view(grads.dv, B, h, dims.tk, dims.dv), 1.0f, grads.accumulate_v);
  }
  if (!grads.dq && !grads.dk) return;
  // dD = dO v^T, then dS in place (dropout's and the softmax's backward, alpha folded in).
  run_gemm(d_out_heads, head_view(v, B, h, dims.tk, dims.dv).transposed(),
           probs_view(d_probs, dims), 1.0f, false);
  attention_softmax_backward(dims, mask, dropout, score_scale(dims), probs, d_probs);
  // S = alpha q k^T:  dq = dS k  and  dk = dS^T q. The writes go dv, dq, dk as on the CPU, so one
  // tensor passed as several inputs accumulates by the same flags.
  if (grads.dq) {
    run_gemm(probs_view(d_probs, dims), head_view(k, B, h, dims.tk, dims.dk),
             head_view(grads.dq, B, h, dims.tq, dims.dk), 1.0f, grads.accumulate_q);
  }
  if (grads.dk) {
    run_gemm(probs_view(d_probs, dims).transposed(), head_view(q, B, h, dims.tq, dims.dk),
             head_view(grads.dk, B, h, dims.tk, dims.dk), 1.0f, grads.accumulate_k);
  }
}

}  // namespace tfm::internal::cuda
