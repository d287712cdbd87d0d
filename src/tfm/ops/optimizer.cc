// Optimizer ops: the Adam update and gradient clipping by global norm (train/). In place, no tape.
#include <cmath>
#include <cstring>

#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::KernelTable;

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const AdamStepOptions& options) {
  for (const Tensor* t : {&param, &grad, &m, &v}) {
    detail::check_input(*t, "adam_step", "an argument");
    TFM_CHECK(t->shape() == param.shape(), "adam_step: {} does not match parameter {}",
              t->describe(), param.describe());
  }
  const Device device = detail::op_device("adam_step", param, grad, m, v);
  kernels::AdamStep step{options.beta1,        options.beta2, options.step_size,
                         options.inv_sqrt_bc2, options.eps,   options.keep};
  detail::kernel("adam_step", device, &KernelTable::adam_step)(
      param.device_data<float>(), m.device_data<float>(), v.device_data<float>(),
      grad.device_data<float>(), param.numel(), step);
}

double global_norm(const std::vector<Tensor>& tensors) {
  double sum = 0;
  // A GPU's tensors' sums of squares add up on the device (in a double that `device_sum`'s 8
  // bytes hold; the table's sum_squares_async), read back once at the end: one wait for the GPU,
  // not one per tensor.
  Tensor device_sum;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    detail::check_input(t, "global_norm", "a tensor");
    const KernelTable& backend = detail::kernels_for("global_norm", t.device());
    if (backend.sum_squares_async == nullptr) {
      sum += detail::entry("global_norm", t.device(), backend.sum_squares)(t.device_data<float>(),
                                                                           t.numel());
      continue;
    }
    const bool accumulate = device_sum.defined();
    if (!accumulate) device_sum = Tensor::empty({2}, DType::f32, t.device());
    backend.sum_squares_async(t.device_data<float>(), t.numel(),
                              static_cast<double*>(device_sum.device_raw()), accumulate);
  }
  if (device_sum.defined()) {
    const Tensor host = device_sum.to(Device::cpu);  // waits for the sums
    double s = 0;
    std::memcpy(&s, host.raw(), sizeof(s));
    sum += s;
  }
  return std::sqrt(sum);
}

void scale_in_place(const std::vector<Tensor>& tensors, float scale) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    detail::check_input(t, "scale_in_place", "a tensor");
    detail::kernel("scale_in_place", t.device(), &KernelTable::scale)(t.device_data<float>(),
                                                                      t.numel(), scale);
  }
}

void fill_in_place(const std::vector<Tensor>& tensors, float value) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    detail::check_input(t, "fill_in_place", "a tensor");
    detail::kernel("fill_in_place", t.device(), &KernelTable::fill)(t.device_data<float>(),
                                                                    t.numel(), value);
  }
}

void moving_average(const Tensor& average, const Tensor& x, float decay) {
  detail::check_input(average, "moving_average", "the average");
  detail::check_input(x, "moving_average", "the tensor averaged");
  TFM_CHECK(x.shape() == average.shape(), "moving_average: {} does not match the average {}",
            x.describe(), average.describe());
  TFM_CHECK(decay >= 0.0f && decay < 1.0f, "moving_average: decay {} is not in [0, 1)", decay);
  const Device device = detail::op_device("moving_average", average, x);
  detail::kernel("moving_average", device, &KernelTable::moving_average)(
      average.device_data<float>(), x.device_data<float>(), x.numel(), decay);
}

}  // namespace tfm::internal::ops
