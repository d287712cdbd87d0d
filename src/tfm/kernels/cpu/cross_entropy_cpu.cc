#include "tfm/kernels/cpu/cross_entropy_cpu.h"

#include <cmath>
#include <limits>
#include <vector>

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

inline void copy_to_bf16(const float* z, int64_t vocab, bf16* out_row) {
  uint16_t* out = reinterpret_cast<uint16_t*>(out_row);
#pragma omp simd
  for (int64_t j = 0; j < vocab; ++j) out[j] = f32_to_bf16_bits(z[j]);
}

// One row's max, sum of logits and e_j = e^{z_j - max} (into e), and its loss terms.
struct RowSoftmax {
  RowLoss loss;
  float sum_e;
};
inline RowSoftmax row_softmax(const float* z, int64_t vocab, int32_t y, float eps, float* e) {
  const auto [max, sum_z] = max_and_sum(z, vocab);
  const float sum_e = sum_exp(z, vocab, max, e);
  return {row_loss_from(max, sum_z, sum_e, z[y], vocab, eps), sum_e};
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
    if (dlogits_bf16 != nullptr) copy_to_bf16(z, vocab, dlogits_bf16 + r * vocab);
  }
}

// R-Drop's symmetric KL between p = softmax(a) and q = softmax(b), with D_j = log p_j - log q_j:
//   f = KL(p || q) + KL(q || p) = sum_j (p_j - q_j) D_j = E_p[D] - E_q[D]
//   df/da_j = p_j (D_j - E_p[D]) + p_j - q_j,   df/db_j = q_j (E_q[D] - D_j) + q_j - p_j
// (d p_k / d a_j = p_k (delta_jk - p_j), and sum_k (p_k - q_k) = 0). The row's consistency is f /
// 2, so its gradient is weight / 2 times these, added to each row's cross-entropy gradient p - q~.
void paired_cross_entropy_rows_with_grad(float* logits_a, float* logits_b, const int32_t* targets,
                                         int64_t rows, int64_t vocab, float label_smoothing,
                                         int32_t ignore_index, float scale, float weight,
                                         float* stats_a, float* stats_b, float* consistency,
                                         bf16* dlogits_a_bf16, bf16* dlogits_b_bf16) {
#pragma omp parallel if (rows * vocab >= kParallelMinElements)
  {
    // p and q of the row at hand, so that each logit is exponentiated once.
    std::vector<float> p(static_cast<size_t>(vocab)), q(static_cast<size_t>(vocab));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t y = targets[r];
      float* za = logits_a + r * vocab;
      float* zb = logits_b + r * vocab;
      if (y == ignore_index) {
        stats_a[2 * r] = stats_a[2 * r + 1] = stats_b[2 * r] = stats_b[2 * r + 1] = 0.0f;
        consistency[r] = 0.0f;
        for (int64_t j = 0; j < vocab; ++j) za[j] = zb[j] = 0.0f;
      } else {
        const RowSoftmax a = row_softmax(za, vocab, y, label_smoothing, p.data());
        const RowSoftmax b = row_softmax(zb, vocab, y, label_smoothing, q.data());
        stats_a[2 * r] = a.loss.loss;
        stats_a[2 * r + 1] = a.loss.nll;
        stats_b[2 * r] = b.loss.loss;
        stats_b[2 * r + 1] = b.loss.nll;
        const float lse_a = a.loss.lse, lse_b = b.loss.lse;
        const float inv_a = 1.0f / a.sum_e, inv_b = 1.0f / b.sum_e;
        float expect_p = 0, expect_q = 0;  // E_p[D], E_q[D]
#pragma omp simd reduction(+ : expect_p, expect_q)
        for (int64_t j = 0; j < vocab; ++j) {
          p[j] *= inv_a;
          q[j] *= inv_b;
          const float d = (za[j] - lse_a) - (zb[j] - lse_b);
          expect_p += p[j] * d;
          expect_q += q[j] * d;
        }
        consistency[r] = 0.5f * (expect_p - expect_q);
        const float smooth = scale * label_smoothing / static_cast<float>(vocab);
        const float c = 0.5f * scale * weight;
#pragma omp simd
        for (int64_t j = 0; j < vocab; ++j) {
          const float d = (za[j] - lse_a) - (zb[j] - lse_b);
          za[j] = scale * p[j] - smooth + c * (p[j] * (d - expect_p) + p[j] - q[j]);
          zb[j] = scale * q[j] - smooth + c * (q[j] * (expect_q - d) + q[j] - p[j]);
        }
        za[y] -= scale * (1.0f - label_smoothing);
        zb[y] -= scale * (1.0f - label_smoothing);
      }
      if (dlogits_a_bf16 != nullptr) copy_to_bf16(za, vocab, dlogits_a_bf16 + r * vocab);
      if (dlogits_b_bf16 != nullptr) copy_to_bf16(zb, vocab, dlogits_b_bf16 + r * vocab);
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
