// LayerNorm over the last dimension of a [rows, d] f32 array, alone or fused with the residual sum
// and dropout that precede it in a post-norm sub-layer.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// y = (x - mean) * rstd * gamma + beta per row, rstd = 1 / sqrt(biased var + eps). Writes each
// row's mean and rstd (arrays of `rows`) for the backward.
void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                float* rstd, int64_t rows, int64_t d, float eps);

using kernels::LayerNormGrads;  // kernels/kernel_args.h

// Gradients of layer_norm given d(y) = g, from the forward's input and saved mean/rstd.
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads);

// The end of a post-norm sub-layer: s = x + dropout(branch) with dropout_cpu's mask for (seed,
// element index r * d + j) (p = 0: no dropout), then y = layer_norm(s). Writes s (the backward's
// input) besides y, mean and rstd; the values are those of the unfused kernels, bit for bit.
void add_dropout_layer_norm(const float* x, const float* branch, float p, uint64_t seed,
                            const float* gamma, const float* beta, float* sum, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t d, float eps);

// Gradients of add_dropout_layer_norm given d(y) = g: grads.dx receives d(x) = d(s) (layer_norm's
// input gradient), grads.dgamma/dbeta as in layer_norm_backward, and dbranch (when not null)
// d(branch) = mask * d(s) / (1 - p).
void add_dropout_layer_norm_backward(const float* sum, const float* gamma, const float* mean,
                                     const float* rstd, const float* g, int64_t rows, int64_t d,
                                     float p, uint64_t seed, const LayerNormGrads& grads,
                                     float* dbranch, bool dbranch_accumulate);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
