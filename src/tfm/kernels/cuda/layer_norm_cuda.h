// LayerNorm over the last dimension of a [rows, d] f32 device array, alone or fused with the
// residual sum and dropout before it (layer_norm_cpu.h on the GPU: the same arguments and
// semantics, device pointers, queued on cuda::stream()).
//
// The backwards take one more argument than the CPU's: `workspace`, device memory of
// layer_norm_backward_workspace(rows, d) floats that the op allocates (the kernels allocate
// nothing), where gamma's and beta's gradients are summed in two stages: per chunk of rows, then
// over the chunks in order, so the sums are the same from run to run (no float atomics). It may be
// null when neither dgamma nor dbeta is wanted.
#pragma once

#include <cstdint>

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

// Where the backwards write (null: not wanted) and whether they add: the CPU kernels' struct.
using LayerNormGrads = kernels::LayerNormGrads;

// y = (x - mean) * rstd * gamma + beta per row, rstd = 1 / sqrt(biased var + eps); writes each
// row's mean and rstd (arrays of `rows`) for the backward.
void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                float* rstd, int64_t rows, int64_t d, float eps);

// The floats of `workspace` the backwards need for rows x d.
int64_t layer_norm_backward_workspace(int64_t rows, int64_t d);

// Gradients of layer_norm given d(y) = g, from the forward's input and saved mean/rstd.
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads,
                         float* workspace);

// s = x + dropout(branch) (the CPU's mask for (seed, element r * d + j); p = 0: no dropout), then
// y = layer_norm(s). Writes s besides y, mean and rstd.
void add_dropout_layer_norm(const float* x, const float* branch, float p, uint64_t seed,
                            const float* gamma, const float* beta, float* sum, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t d, float eps);

// Gradients of add_dropout_layer_norm given d(y) = g: grads.dx receives d(s), grads.dgamma/dbeta
// as in layer_norm_backward, dbranch (when not null) mask * d(s) / (1 - p).
void add_dropout_layer_norm_backward(const float* sum, const float* gamma, const float* mean,
                                     const float* rstd, const float* g, int64_t rows, int64_t d,
                                     float p, uint64_t seed, const LayerNormGrads& grads,
                                     float* dbranch, bool dbranch_accumulate, float* workspace);

}  // namespace tfm::internal::cuda
