#include "tfm/kernels/cpu/layer_norm_cpu.h"

#include <algorithm>
#include <cmath>

#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/dropout_cpu.h"
#include "tfm/kernels/cpu/parallel.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

// One row of layer_norm, shared by the plain and the fused forward so that both give the same bits.
// Two passes: the mean first (summed in double, so that rows far from zero keep their digits), then
// the variance of the centred values, which has no cancellation.
inline void normalize_row(const float* xr, const float* gamma, const float* beta, float* yr,
                          float* mean, float* rstd, int64_t d, float eps) {
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
  *mean = mu;
  *rstd = rs;
}

// Rows per chunk of the backward: each chunk sums its rows' dgamma and dbeta into its own partial
// row, and the partials are added in chunk order, so the result does not depend on the thread
// count.
constexpr int64_t kRowsPerChunk = 32;

// Where the fused backward sends d(s) besides dx: the dropout branch.
struct BranchGrad {
  float* grad = nullptr;
  bool accumulate = false;
  float p = 0.0f;
  uint64_t seed = 0;
};

// With xhat = (x - mean) * rstd and y = xhat * gamma + beta:
//   dbeta  = sum over rows of g
//   dgamma = sum over rows of g * xhat
//   dx     = rstd * (dxhat - mean_j(dxhat) - xhat * mean_j(dxhat * xhat)),  dxhat = g * gamma
// (the last two terms are the paths through the row's mean and variance), plus grads.residual (the
// gradient that reaches x past the norm) where given. With a branch (the fused
// sub-layer end, x = s = residual + dropout(branch)), d(branch) = mask * dx / (1 - p) as in
// dropout_backward.
void backward_rows(const float* x, const float* gamma, const float* mean, const float* rstd,
                   const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads,
                   const BranchGrad& branch) {
  const bool want_params = grads.dgamma != nullptr || grads.dbeta != nullptr;
  const bool want_branch = branch.grad != nullptr;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  // partial[c] = [dgamma over chunk c (d values), dbeta over chunk c (d values)]
  Tensor partial_tensor;
  float* partial = nullptr;
  if (want_params && chunks > 0) {
    partial_tensor = Tensor::empty({chunks, 2 * d});
    partial = partial_tensor.data<float>();
  }
  // A row of d(s) per chunk for the fused backward when dx cannot hold it: the dx and d(branch)
  // writes then read it back from memory, as the unfused add and dropout backward would.
  Tensor scratch_tensor;
  if ((want_branch || grads.residual != nullptr) && chunks > 0)
    scratch_tensor = Tensor::empty({chunks, d});
  const float inv_d = 1.0f / static_cast<float>(d);
  // Copies in registers: read through `branch` inside the loops, they would be reloaded after every
  // store (as far as the compiler knows, a store could change them), which stops vectorisation.
  const float p = branch.p, keep_scale = 1.0f / (1.0f - p);
  const uint64_t seed = branch.seed;

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
      if (grads.dx == nullptr && !want_branch) continue;
      float sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
      for (int64_t j = 0; j < d; ++j) {
        float dxhat = gr[j] * gamma[j];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * (xr[j] - mu) * rs;
      }
      const float mean_dxhat = sum_dxhat * inv_d;
      const float mean_dxhat_xhat = sum_dxhat_xhat * inv_d;
      float* dxr = grads.dx != nullptr ? grads.dx + r * d : nullptr;
      const float* res = grads.residual != nullptr ? grads.residual + r * d : nullptr;
      if (dxr != nullptr && grads.dx_accumulate && !want_branch && res == nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          dxr[j] += rs * (gr[j] * gamma[j] - mean_dxhat - (xr[j] - mu) * rs * mean_dxhat_xhat);
        continue;
      }
      // d(s) itself: into dx when dx is written fresh, else into the chunk's scratch row.
      float* ds =
          dxr != nullptr && !grads.dx_accumulate ? dxr : scratch_tensor.data<float>() + c * d;
      if (res != nullptr) {
        // The residual's gradient first, then the norm's added to it: the order (and the one
        // rounding of a contracted multiply-add) of the unfused ops, where the stream's later use
        // writes d(s) before the norm's backward adds to it.
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          ds[j] =
              res[j] + rs * (gr[j] * gamma[j] - mean_dxhat - (xr[j] - mu) * rs * mean_dxhat_xhat);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          ds[j] = rs * (gr[j] * gamma[j] - mean_dxhat - (xr[j] - mu) * rs * mean_dxhat_xhat);
      }
      if (!want_branch && dxr != nullptr && grads.dx_accumulate) {
        // A pre-norm stream without a branch gradient: d(s) goes to dx alone.
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) dxr[j] += ds[j];
        continue;
      }
      if (!want_branch) continue;
      if (dxr != nullptr && grads.dx_accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) dxr[j] += ds[j];
      }
      float* db = branch.grad + r * d;
      const uint64_t first = static_cast<uint64_t>(r * d);
      if (p == 0.0f) {
        if (branch.accumulate) {
#pragma omp simd
          for (int64_t j = 0; j < d; ++j) db[j] += ds[j];
        } else {
          std::copy(ds, ds + d, db);
        }
      } else if (branch.accumulate) {
        // Stored before it is added (in the scratch row, which may be ds itself: ds is not needed
        // after this), as the unfused dropout and add do: one expression would let the compiler
        // fuse the multiply and the add and round once instead of twice.
        float* dropped = scratch_tensor.data<float>() + c * d;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          dropped[j] = dropout_keep(seed, first + j, p) ? ds[j] * keep_scale : 0.0f;
#pragma omp simd
        for (int64_t j = 0; j < d; ++j) db[j] += dropped[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < d; ++j)
          db[j] = dropout_keep(seed, first + j, p) ? ds[j] * keep_scale : 0.0f;
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

}  // namespace

void layer_norm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                float* rstd, int64_t rows, int64_t d, float eps) {
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r)
    normalize_row(x + r * d, gamma, beta, y + r * d, mean + r, rstd + r, d, eps);
}

void layer_norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                         const float* g, int64_t rows, int64_t d, const LayerNormGrads& grads) {
  backward_rows(x, gamma, mean, rstd, g, rows, d, grads, BranchGrad{});
}

void add_dropout_layer_norm(const float* x, const float* branch, float p, uint64_t seed,
                            const float* gamma, const float* beta, float* sum, float* y,
                            float* mean, float* rstd, int64_t rows, int64_t d, float eps) {
  const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* br = branch + r * d;
    float* sr = sum + r * d;
    // The dropped branch is stored before it is added, as the unfused dropout and add do: one
    // expression would let the compiler fuse the multiply and the add and round once, not twice.
    if (p > 0.0f) {
      const uint64_t first = static_cast<uint64_t>(r * d);
#pragma omp simd
      for (int64_t j = 0; j < d; ++j)
        sr[j] = dropout_keep(seed, first + j, p) ? br[j] * scale : 0.0f;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) sr[j] = xr[j] + sr[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) sr[j] = xr[j] + br[j];
    }
    normalize_row(sr, gamma, beta, y + r * d, mean + r, rstd + r, d, eps);
  }
}

void add_dropout_layer_norm_backward(const float* sum, const float* gamma, const float* mean,
                                     const float* rstd, const float* g, int64_t rows, int64_t d,
                                     float p, uint64_t seed, const LayerNormGrads& grads,
                                     float* dbranch, bool dbranch_accumulate) {
  backward_rows(sum, gamma, mean, rstd, g, rows, d, grads,
                BranchGrad{dbranch, dbranch_accumulate, p, seed});
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
