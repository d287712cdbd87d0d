#include "tfm/train/adam.h"

#include <algorithm>
#include <cmath>
#include <utility>

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

bool Adam::use_flat(const Tensor& flat_parameters, const Tensor& flat_gradients) {
  TFM_CHECK(steps_ == 0, "Adam::use_flat after {} steps would lose the moments", steps_);
  if (parameters_.empty() || !flat_parameters.defined() || !flat_gradients.defined() ||
      flat_parameters.numel() != flat_gradients.numel() ||
      flat_parameters.device() != flat_gradients.device())
    return false;
  // Each parameter's offset in both buffers (in elements); they must tile the buffers exactly.
  const auto* p_base = static_cast<const char*>(flat_parameters.device_raw());
  const auto* g_base = static_cast<const char*>(flat_gradients.device_raw());
  std::vector<std::pair<int64_t, int64_t>> spans;  // offset, numel
  for (const Tensor& p : parameters_) {
    const Tensor& g = p.autograd_meta()->grad;
    if (!g.defined() || p.device() != flat_parameters.device()) return false;
    const auto p_offset = static_cast<const char*>(p.device_raw()) - p_base;
    const auto g_offset = static_cast<const char*>(g.device_raw()) - g_base;
    if (p_offset != g_offset || p_offset % 4 != 0) return false;
    spans.emplace_back(p_offset / 4, p.numel());
  }
  std::sort(spans.begin(), spans.end());
  int64_t next = 0;
  for (const auto& [offset, numel] : spans) {
    if (offset != next) return false;
    next += numel;
  }
  if (next != flat_parameters.numel()) return false;

  flat_parameters_ = flat_parameters;
  flat_gradients_ = flat_gradients;
  flat_m_ = Tensor::zeros(flat_parameters.shape(), DType::f32, flat_parameters.device());
  flat_v_ = Tensor::zeros(flat_parameters.shape(), DType::f32, flat_parameters.device());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i];
    const int64_t offset = (static_cast<const char*>(p.device_raw()) - p_base) / 4;
    m_[i] = flat_m_.slice_rows(offset, offset + p.numel()).view(p.shape());
    v_[i] = flat_v_.slice_rows(offset, offset + p.numel()).view(p.shape());
  }
  return true;
}

bool Adam::flat_gradients_complete() const {
  if (!flat_parameters_.defined()) return false;
  // A gradient buffer replaced since use_flat (none is: the tape writes into the one it finds)
  // would leave the flat buffer stale.
  for (const Tensor& p : parameters_) {
    const Tensor g = p.grad();
    if (!g.defined() || !g.same_storage(flat_gradients_)) return false;
  }
  return true;
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
  step.keep = static_cast<float>(1.0 - lr * options_.weight_decay);
  if (flat_gradients_complete()) {
    // The same update of every element as below, in one pass over the buffers.
    ops::adam_step(flat_parameters_, flat_gradients_, flat_m_, flat_v_, step);
    return;
  }
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
