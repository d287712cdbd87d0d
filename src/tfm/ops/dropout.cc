#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::KernelTable;

Tensor dropout(const Tensor& x, float p, uint64_t seed) {
  detail::check_input(x, "dropout", "x");
  TFM_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability {} is outside [0, 1)", p);
  if (p == 0.0f) return x;
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  detail::kernel("dropout", device, &KernelTable::dropout)(
      x.device_data<float>(), out.device_data<float>(), out.numel(), p, seed);
  if (needs_grad({&x})) {
    out.set_requires_grad(true);
    // y = m * x / (1 - p) with the mask m recomputed from the seed: dx = m * g / (1 - p).
    record_backward(out, [x, out, p, seed, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      GradTarget target = grad_target(x);
      detail::kernel("dropout", device, &KernelTable::dropout_backward)(
          g.device_data<float>(), target.tensor.device_data<float>(), g.numel(), p, seed,
          target.accumulate);
    });
  }
  return out;
}

}  // namespace tfm::internal::ops
