#include "tfm/train/adam.h"

#include <cmath>

#include "tfm/ops/ops.h"

namespace tfm::internal {

Adam::Adam(std::vector<Tensor> parameters, AdamOptions options)
    : parameters_(std::move(parameters)), options_(options) {
  for (const Tensor& p : parameters_) {
    TFM_CHECK(p.dtype() == DType::f32 && p.requires_grad(),
              "Adam needs f32 parameters that require gradients, got {}", p.describe());
    m_.push_back(Tensor::zeros(p.shape(), DType::f32, p.device()));
    v_.push_back(Tensor::zeros(p.shape(), DType::f32, p.device()));
  }
}

void Adam::step(double lr) {
  ++steps_;
  const double t = static_cast<double>(steps_);
  ops::AdamStepOptions step;
  step.beta1 = static_cast<float>(options_.beta1);
  step.beta2 = static_cast<float>(options_.beta2);
  step.step_size = static_cast<float>(lr / (1.0 - std::pow(options_.beta1, t)));
  step.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(options_.beta2, t)));
  step.eps = static_cast<float>(options_.eps);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Tensor grad = parameters_[i].grad();
    if (!grad.defined()) continue;
    ops::adam_step(parameters_[i], grad, m_[i], v_[i], step);
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

}  // namespace tfm::internal
