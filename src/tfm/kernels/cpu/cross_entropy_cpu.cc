#include "tfm/kernels/cpu/cross_entropy_cpu.h"

#include <cmath>
#include <limits>

#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/parallel.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

struct RowLoss {
  float lse, loss, nll;
};

// With lse = log sum_j e^{z_j}, log p_j = z_j - lse and q = (1 - eps) onehot(y) + eps / V:
//   loss_row = -sum_j q_j log p_j = (1 - eps) (lse - z_y) + eps (lse - mean_j z_j)
//   nll_row  = lse - z_y
// One function for the fused and the unfused paths, so that both give the same loss bits.
// From the row's maximum, sum of logits, sum_j e^{z_j - max} and target logit.
inline RowLoss row_loss_from(float max, float sum_z, float sum_exp, float z_target, int64_t vocab,
                             double eps) {
  const double row_lse = static_cast<double>(max) + std::log(static_cast<double>(sum_exp));
  const double nll = row_lse - z_target;
  const double smooth = row_lse - static_cast<double>(sum_z) / static_cast<double>(vocab);
  return {static_cast<float>(row_lse), static_cast<float>((1.0 - eps) * nll + eps * smooth),
          static_cast<float>(nll)};
}

// The row's maximum and sum of its logits.
struct MaxAndSum {
  float max, sum;
};
inline MaxAndSum max_and_sum(const float* z, int64_t vocab) {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0;
#pragma omp simd reduction(max : max) reduction(+ : sum)
  for (int64_t j = 0; j < vocab; ++j) {
    max = z[j] > max ? z[j] : max;
    sum += z[j];
  }
  return {max, sum};
}

inline RowLoss row_loss(const float* z, int64_t vocab, int32_t y, double eps) {
  const auto [max, sum_z] = max_and_sum(z, vocab);
  return row_loss_from(max, sum_z, sum_exp(z, vocab, max), z[y], vocab, eps);
}

// d loss_row / d z_j = sum_k q_k (p_j - delta_jk) = p_j - q_j (q sums to 1), with p_j = e^{z_j -
// lse}: dz (+)= scale * (p - q). dz may be z itself.
inline void row_grad(const float* z, int32_t y, float row_lse, int64_t vocab, float label_smoothing,
                     float scale, float* dz, bool accumulate) {
  const float smooth = label_smoothing / static_cast<float>(vocab);
  const float on_target = 1.0f - label_smoothing;
  if (accumulate) {
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) dz[j] += scale * (exp_f32(z[j] - row_lse) - smooth);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) dz[j] = scale * (exp_f32(z[j] - row_lse) - smooth);
  }
  dz[y] -= scale * on_target;
}

}  // namespace

void cross_entropy_rows(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                        float label_smoothing, int32_t ignore_index, float* row_loss_nll,
                        float* lse) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t y = targets[r];
    if (y == ignore_index) {
      row_loss_nll[2 * r] = row_loss_nll[2 * r + 1] = 0.0f;
      continue;
    }
    RowLoss row = row_loss(logits + r * vocab, vocab, y, label_smoothing);
    if (lse != nullptr) lse[r] = row.lse;
    row_loss_nll[2 * r] = row.loss;
    row_loss_nll[2 * r + 1] = row.nll;
  }
}

void cross_entropy_rows_with_grad(float* logits, const int32_t* targets, int64_t rows,
                                  int64_t vocab, float label_smoothing, int32_t ignore_index,
                                  float scale, float* row_loss_nll, bf16* dlogits_bf16) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t y = targets[r];
    float* z = logits + r * vocab;
    if (y == ignore_index) {
      row_loss_nll[2 * r] = row_loss_nll[2 * r + 1] = 0.0f;
      for (int64_t j = 0; j < vocab; ++j) z[j] = 0.0f;
    } else {
      // As row_loss and row_grad, with one exponential per logit instead of two: e_j = e^{z_j -
      // max} is kept in z, and p_j = e_j / sum_i e_i.
      const auto [max, sum_z] = max_and_sum(z, vocab);
      const float z_target = z[y];
      const float sum_e = sum_exp(z, vocab, max, z);
      const RowLoss row = row_loss_from(max, sum_z, sum_e, z_target, vocab, label_smoothing);
      row_loss_nll[2 * r] = row.loss;
      row_loss_nll[2 * r + 1] = row.nll;
      // dz = scale (p - q): scale (e_j / sum - eps / V), and - scale (1 - eps) at the target.
      const float p_scale = scale / sum_e;
      const float smooth = scale * label_smoothing / static_cast<float>(vocab);
#pragma omp simd
      for (int64_t j = 0; j < vocab; ++j) z[j] = z[j] * p_scale - smooth;
      z[y] -= scale * (1.0f - label_smoothing);
    }
    if (dlogits_bf16 != nullptr) {
      uint16_t* out = reinterpret_cast<uint16_t*>(dlogits_bf16 + r * vocab);
#pragma omp simd
      for (int64_t j = 0; j < vocab; ++j) out[j] = f32_to_bf16_bits(z[j]);
    }
  }
}

CrossEntropySums cross_entropy(const float* logits, const int32_t* targets, int64_t rows,
                               int64_t vocab, float label_smoothing, int32_t ignore_index,
                               float* lse) {
  // Per-row results are summed after the parallel loop in row order, so the totals do not depend
  // on the thread count.
  Tensor row_sums = Tensor::empty({rows, 2});
  float* row_loss_nll = row_sums.data<float>();
  cross_entropy_rows(logits, targets, rows, vocab, label_smoothing, ignore_index, row_loss_nll,
                     lse);
  CrossEntropySums sums;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) continue;
    sums.loss += row_loss_nll[2 * r];
    sums.nll += row_loss_nll[2 * r + 1];
    ++sums.tokens;
  }
  return sums;
}

void cross_entropy_backward(const float* logits, const int32_t* targets, const float* lse,
                            int64_t rows, int64_t vocab, float label_smoothing,
                            int32_t ignore_index, float scale, float* dlogits, bool accumulate) {
#pragma omp parallel for schedule(static) if (rows * vocab >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t y = targets[r];
    float* dz = dlogits + r * vocab;
    if (y == ignore_index) {
      if (!accumulate)
        for (int64_t j = 0; j < vocab; ++j) dz[j] = 0.0f;
      continue;
    }
    row_grad(logits + r * vocab, y, lse[r], vocab, label_smoothing, scale, dz, accumulate);
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
