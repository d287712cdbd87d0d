#include "tfm/decode/ensemble_scorer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "tfm/core/error.h"

namespace tfm::internal::decode {

EnsembleScorer::EnsembleScorer(std::vector<std::unique_ptr<StepScorer>> members)
    : members_(std::move(members)) {
  TFM_CHECK(!members_.empty(), "ensemble: no models");
  for (const auto& member : members_) {
    TFM_CHECK(member != nullptr, "ensemble: a missing model");
    TFM_CHECK(member->rows() == rows() && member->vocab_size() == vocab_size(),
              "ensemble: a model with {} rows of {} tokens beside {} rows of {}", member->rows(),
              member->vocab_size(), rows(), vocab_size());
  }
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
// Up to this many best tokens a row are found by one scan with a sorted buffer, beyond by
// nth_element.
constexpr int64_t kScanned = 64;

// log (1/N sum_k exp(values[k][i])) from the largest term (-inf when every term is -inf).
float log_mean_exp(const std::vector<const float*>& values, int64_t i, float log_members) {
  float largest = -kInf;
  for (const float* member : values) largest = std::max(largest, member[i]);
  if (largest == -kInf) return -kInf;
  float sum = 0.0F;
  for (const float* member : values) sum += std::exp(member[i] - largest);
  return largest + std::log(sum) - log_members;
}

std::vector<const float*> host_values(const std::vector<Tensor>& parts) {
  std::vector<const float*> values;
  for (const Tensor& part : parts) values.push_back(part.data<float>());
  return values;
}

}  // namespace

std::vector<Tensor> EnsembleScorer::member_steps(const std::vector<int32_t>& last_tokens) {
  const int64_t step = steps_++;
  std::vector<Tensor> parts;
  parts.reserve(members_.size());
  for (const auto& member : members_) {
    Tensor part = member->step(last_tokens).to(Device::cpu);
    TFM_CHECK(part.rank() == 2 && part.dim(0) == rows() && part.dim(1) == vocab_size() &&
                  part.dtype() == DType::f32,
              "ensemble: a model returned {}, expected f32 [{}, {}]", part.describe(), rows(),
              vocab_size());
    const float* values = part.data<float>();
    const int64_t count = part.numel();
    int64_t non_finite = 0;  // NaN or +inf: !(x < inf)
#pragma omp parallel for reduction(+ : non_finite)
    for (int64_t i = 0; i < count; ++i) non_finite += !(values[i] < kInf) ? 1 : 0;
    if (non_finite > 0) fail_non_finite(step);
    parts.push_back(std::move(part));
  }
  return parts;
}

Tensor EnsembleScorer::step(const std::vector<int32_t>& last_tokens) {
  const std::vector<Tensor> parts = member_steps(last_tokens);
  const std::vector<const float*> values = host_values(parts);
  const float log_members = std::log(static_cast<float>(values.size()));
  const int64_t count = rows() * vocab_size();
  Tensor mean = Tensor::empty({rows(), vocab_size()});
  float* out = mean.data<float>();
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i) out[i] = log_mean_exp(values, i, log_members);
  return mean;
}

void EnsembleScorer::step_top(const std::vector<int32_t>& last_tokens, int64_t m, int32_t excluded,
                              StepTop& out) {
  const std::vector<Tensor> parts = member_steps(last_tokens);
  const std::vector<const float*> values = host_values(parts);
  const float log_members = std::log(static_cast<float>(values.size()));
  const int64_t vocab = vocab_size();
  const int64_t per_row = std::min(m, vocab);
  out.resize(rows(), per_row);
#pragma omp parallel
  {
    std::vector<float> largest(static_cast<size_t>(vocab));
    std::vector<float> sorted, top;
    std::vector<std::pair<float, int32_t>> kept;
#pragma omp for
    for (int64_t r = 0; r < rows(); ++r) {
      // a(t): the largest member value of each token (-inf for the excluded one).
      float* a = largest.data();
      const float* first = values.front() + r * vocab;
      std::copy(first, first + vocab, a);
      for (size_t k = 1; k < values.size(); ++k) {
        const float* member = values[k] + r * vocab;
        for (int64_t t = 0; t < vocab; ++t) a[t] = std::max(a[t], member[t]);
      }
      if (excluded >= 0 && excluded < vocab) a[excluded] = -kInf;
      // The per_row-th largest a (-inf when fewer tokens have a finite one): the per_row largest
      // kept in ascending order while scanning, or nth_element for a wide beam.
      float a_m = -kInf;
      if (per_row <= kScanned) {
        top.assign(static_cast<size_t>(per_row), -kInf);
        for (int64_t t = 0; t < vocab; ++t) {
          if (!(a[t] > top.front())) continue;
          size_t i = 1;
          for (; i < top.size() && top[i] < a[t]; ++i) top[i - 1] = top[i];
          top[i - 1] = a[t];
        }
        a_m = top.front();
      } else {
        sorted.assign(a, a + vocab);
        std::nth_element(sorted.begin(), sorted.begin() + (per_row - 1), sorted.end(),
                         std::greater<>());
        a_m = sorted[static_cast<size_t>(per_row - 1)];
      }
      // Only the tokens at or above the cut can rank: their means, best first.
      const float cut = a_m - log_members;
      kept.clear();
      for (int64_t t = 0; t < vocab; ++t)
        if (a[t] >= cut && a[t] > -kInf)
          kept.emplace_back(log_mean_exp(values, r * vocab + t, log_members),
                            static_cast<int32_t>(t));
      out.set_row(r, kept);
    }
  }
}

void EnsembleScorer::select(const std::vector<int64_t>& rows) {
  for (const auto& member : members_) member->select(rows);
}

}  // namespace tfm::internal::decode
