#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::KernelTable;

Tensor softmax(const Tensor& x) {
  detail::check_input(x, "softmax", "x");
  TFM_CHECK(x.rank() >= 1 && x.dim(-1) > 0, "softmax: x needs a non-empty last dimension, got {}",
            x.describe());
  const int64_t n = x.dim(-1);
  const int64_t rows = x.numel() / n;
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  detail::kernel("softmax", device, &KernelTable::softmax)(x.device_data<float>(),
                                                           out.device_data<float>(), rows, n);
  if (needs_grad({&x})) {
    out.set_requires_grad(true);
    // dx = y * (g - sum(g * y)) per row (derived in kernels/cpu/softmax_cpu.cc); only y is needed.
    record_backward(out, [x, out, rows, n, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      GradTarget target = grad_target(x);
      detail::kernel("softmax", device, &KernelTable::softmax_backward)(
          out.device_data<float>(), g.device_data<float>(), target.tensor.device_data<float>(),
          rows, n, target.accumulate);
    });
  }
  return out;
}

}  // namespace tfm::internal::ops
