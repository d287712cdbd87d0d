#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/layer_norm_grads.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::check_input;
using detail::KernelTable;

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  check_input(x, "layer_norm", "x");
  check_input(gamma, "layer_norm", "gamma");
  check_input(beta, "layer_norm", "beta");
  TFM_CHECK(x.rank() >= 1, "layer_norm: x must have at least one dimension, got {}", x.describe());
  const int64_t d = x.dim(-1);
  TFM_CHECK(gamma.shape() == Shape{d} && beta.shape() == Shape{d},
            "layer_norm: gamma {} and beta {} must both be [{}] for x {}", gamma.describe(),
            beta.describe(), d, x.describe());
  TFM_CHECK(eps > 0.0f, "layer_norm: eps must be positive, got {}", eps);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;

  const Device device = detail::op_device("layer_norm", x, gamma, beta);
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  Tensor mean = Tensor::empty({rows}, DType::f32, device);
  Tensor rstd = Tensor::empty({rows}, DType::f32, device);
  detail::kernel("layer_norm", device, &KernelTable::layer_norm)(
      x.device_data<float>(), gamma.device_data<float>(), beta.device_data<float>(),
      out.device_data<float>(), mean.device_data<float>(), rstd.device_data<float>(), rows, d, eps);
  if (needs_grad({&x, &gamma, &beta})) {
    out.set_requires_grad(true);
    // The gradient formulas are in kernels/cpu/layer_norm_cpu.cc, next to the code.
    record_backward(out, [x, gamma, beta, mean, rstd, out, rows, d, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      const KernelTable& backend = detail::kernels_for("layer_norm", device);
      kernels::LayerNormGrads grads = layer_norm_grad_targets(x, gamma, beta);
      Tensor workspace = layer_norm_workspace(backend, grads, rows, d, device);
      detail::entry("layer_norm", device, backend.layer_norm_backward)(
          x.device_data<float>(), gamma.device_data<float>(), mean.device_data<float>(),
          rstd.device_data<float>(), g.device_data<float>(), rows, d, grads,
          detail::data_or_null<float>(workspace));
    });
  }
  return out;
}

}  // namespace tfm::internal::ops
