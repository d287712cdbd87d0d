#include "tfm/kernels/cpu/layer_norm_cpu.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/parallel.h"

namespace tfm::cpu {

void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                float* rstd, int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    // Two passes: the mean first (summed in double, so that rows far from zero keep their
    // digits), then the variance of the centred values, which has no cancellation.
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < d; ++j) sum += xr[j];
    const float mu = static_cast<float>(sum / static_cast<double>(d));
    float squares = 0;
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < d; ++j) {
      float c = xr[j] - mu;
      squares += c * c;
    }
    const float rs = 1.0f / std::sqrt(squares / static_cast<float>(d) + eps);
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

namespace {

// Rows per chunk of the backward: each chunk sums its rows' dgamma and dbeta into its own partial
// row, and the partials are added in chunk order, so the result does not depend on the thread
// count.
constexpr int64_t kRowsPerChunk = 32;

}  // namespace

// With xhat = (x - mean) * rstd and y = xhat * gamma + beta:
//   dbeta  = sum over rows of g
//   dgamma = sum over rows of g * xhat
//   dx     = rstd * (dxhat - mean_j(dxhat) - xhat * mean_j(dxhat * xhat)),  dxhat = g * gamma
// (the last two terms are the paths through the row's mean and variance).
void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads) {
  const bool want_params = grads.dgamma != nullptr || grads.dbeta != nullptr;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  // partial[c] = [dgamma over chunk c (d values), dbeta over chunk c (d values)]
  Tensor partial_tensor;
  float* partial = nullptr;
  if (want_params && chunks > 0) {
    partial_tensor = Tensor::empty({chunks, 2 * d});
    partial = partial_tensor.data<float>();
  }
  const float inv_d = 1.0f / static_cast<float>(d);

#pragma omp parallel for schedule(static) if (rows * d >= kParallelMinElements)
  for (int64_t c = 0; c < chunks; ++c) {
    float* pg = want_params ? partial + c * 2 * d : nullptr;
    float* pb = want_params ? pg + d : nullptr;
    if (want_params) std::fill(pg, pg + 2 * d, 0.0f);
    const int64_t end = std::min(rows, (c + 1) * kRowsPerChunk);
    for (int64_t r = c * kRowsPerChunk; r < end; ++r) {
      const float* xr = x + r * d;
      const float* gr = g + r * d;
      const float mu = mean[r];
      const float rs = rstd[r];
      if (want_params) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) {
          pg[j] += gr[j] * (xr[j] - mu) * rs;
          pb[j] += gr[j];
        }
      }
      if (grads.dx == nullptr) continue;
      float sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
      for (int64_t j = 0; j < d; ++j) {
        float dxhat = gr[j] * gamma[j];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * (xr[j] - mu) * rs;
      }
      const float mean_dxhat = sum_dxhat * inv_d;
      const float mean_dxhat_xhat = sum_dxhat_xhat * inv_d;
      float* dxr = grads.dx + r * d;
      if (grads.dx_accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          dxr[j] += rs * (gr[j] * gamma[j] - mean_dxhat - (xr[j] - mu) * rs * mean_dxhat_xhat);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          dxr[j] = rs * (gr[j] * gamma[j] - mean_dxhat - (xr[j] - mu) * rs * mean_dxhat_xhat);
      }
    }
  }

  if (!want_params) return;
#pragma omp parallel for schedule(static) if (chunks * d >= kParallelMinElements)
  for (int64_t j = 0; j < d; ++j) {
    double sg = 0, sb = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      sg += partial[c * 2 * d + j];
      sb += partial[c * 2 * d + d + j];
    }
    if (grads.dgamma != nullptr) {
      float v = static_cast<float>(sg);
      grads.dgamma[j] = grads.dgamma_accumulate ? grads.dgamma[j] + v : v;
    }
    if (grads.dbeta != nullptr) {
      float v = static_cast<float>(sb);
      grads.dbeta[j] = grads.dbeta_accumulate ? grads.dbeta[j] + v : v;
    }
  }
}

}  // namespace tfm::cpu
