// LayerNorm over the last dimension of a [rows, d] f32 array.
#pragma once

#include <cstdint>

namespace tfm::cpu {

// y = (x - mean) * rstd * gamma + beta per row, rstd = 1 / sqrt(biased var + eps). Writes each
// row's mean and rstd (arrays of `rows`) for the backward.
void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                float* rstd, int64_t rows, int64_t d, float eps);

struct LayerNormGrads {
  float* dx = nullptr;  // null: not wanted
  bool dx_accumulate = false;
  float* dgamma = nullptr;
  bool dgamma_accumulate = false;
  float* dbeta = nullptr;
  bool dbeta_accumulate = false;
};

// Gradients of layer_norm given d(y) = g, from the forward's input and saved mean/rstd.
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads);

}  // namespace tfm::cpu
