// Optimizer ops: the Adam update and gradient clipping by global norm (train/). In place, no tape.
#include <cmath>

#include "tfm/kernels/cpu/optimizer_cpu.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::ops {

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const AdamStepOptions& options) {
  for (const Tensor* t : {&param, &grad, &m, &v}) {
    detail::check_input(*t, "adam_step", "an argument");
    TFM_CHECK(t->shape() == param.shape(), "adam_step: {} does not match parameter {}",
              t->describe(), param.describe());
  }
  const Device device = detail::op_device("adam_step", param, grad, m, v);
  cpu::AdamStep step{options.beta1, options.beta2, options.step_size, options.inv_sqrt_bc2,
                     options.eps};
  TFM_DISPATCH("adam_step", device,
               cpu::adam_step(param.data<float>(), m.data<float>(), v.data<float>(),
                              grad.data<float>(), param.numel(), step));
}

double global_norm(const std::vector<Tensor>& tensors) {
  double sum = 0;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    detail::check_input(t, "global_norm", "a tensor");
    double s = 0;
    TFM_DISPATCH("global_norm", t.device(), s = cpu::sum_squares(t.data<float>(), t.numel()));
    sum += s;
  }
  return std::sqrt(sum);
}

void scale_in_place(const std::vector<Tensor>& tensors, float scale) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    detail::check_input(t, "scale_in_place", "a tensor");
    TFM_DISPATCH("scale_in_place", t.device(), cpu::scale(t.data<float>(), t.numel(), scale));
  }
}

void fill_in_place(const std::vector<Tensor>& tensors, float value) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    detail::check_input(t, "fill_in_place", "a tensor");
    TFM_DISPATCH("fill_in_place", t.device(), cpu::fill(t.data<float>(), t.numel(), value));
  }
}

}  // namespace tfm::ops
