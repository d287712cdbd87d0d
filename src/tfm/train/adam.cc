#include "tfm/train/adam.h"

#include <cmath>

namespace tfm {

Adam::Adam(std::vector<Tensor> parameters, AdamOptions options)
    : parameters_(std::move(parameters)), options_(options) {
  for (const Tensor& p : parameters_) {
    TFM_CHECK(p.dtype() == DType::f32 && p.requires_grad(),
              "Adam needs f32 parameters that require gradients, got {}", p.describe());
    m_.push_back(Tensor::zeros(p.shape()));
    v_.push_back(Tensor::zeros(p.shape()));
  }
}

void Adam::step(double lr) {
  ++steps_;
  const double t = static_cast<double>(steps_);
  const float b1 = static_cast<float>(options_.beta1);
  const float b2 = static_cast<float>(options_.beta2);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(options_.beta1, t)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const float eps = static_cast<float>(options_.eps);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor grad = parameters_[i].grad();
    if (!grad.defined()) continue;
    float* p = parameters_[i].data<float>();
    float* m = m_[i].data<float>();
    float* v = v_[i].data<float>();
    const float* g = grad.data<float>();
    const int64_t n = parameters_[i].numel();
#pragma omp parallel for simd schedule(static) if (n > 32768)
    for (int64_t j = 0; j < n; ++j) {
      m[j] = b1 * m[j] + (1.0f - b1) * g[j];
      v[j] = b2 * v[j] + (1.0f - b2) * g[j] * g[j];
      p[j] -= step_size * m[j] / (std::sqrt(v[j]) * inv_sqrt_bc2 + eps);
    }
  }
}

void Adam::zero_grad() {
  for (Tensor& p : parameters_) p.zero_grad();
}

void Adam::restore(int64_t steps, const std::vector<Tensor>& m, const std::vector<Tensor>& v) {
  TFM_CHECK(m.size() == m_.size() && v.size() == v_.size(),
            "optimizer state has {} tensors, the model {}", m.size(), m_.size());
  for (size_t i = 0; i < m_.size(); ++i) {
    TFM_CHECK(m[i].shape() == m_[i].shape() && v[i].shape() == v_[i].shape(),
              "optimizer state tensor {} is {}, expected {}", i, m[i].describe(), m_[i].describe());
    m_[i].copy_from(m[i]);
    v_[i].copy_from(v[i]);
  }
  steps_ = steps;
}

}  // namespace tfm
