// add, relu and reshape: ops whose backward passes the gradient through element by element.
#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::check_input;
using detail::KernelTable;

Tensor add(const Tensor& a, const Tensor& b) {
  check_input(a, "add", "a");
  check_input(b, "add", "b");
  TFM_CHECK(a.shape() == b.shape(), "add: shapes differ: a is {}, b is {}", a.describe(),
            b.describe());
  const Device device = detail::op_device("add", a, b);
  Tensor out = Tensor::empty(a.shape(), DType::f32, device);
  detail::kernel("add", device, &KernelTable::add)(a.device_data<float>(), b.device_data<float>(),
                                                   out.device_data<float>(), out.numel());
  if (needs_grad({&a, &b})) {
    // The closure copies `out`: it must carry its autograd record first, so that the copy sees the
    // gradient the tape writes into it.
    out.set_requires_grad(true);
    // out = a + b: da = g, db = g. add(x, x) sums both into x's gradient.
    record_backward(out, [a, b, out, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      for (const Tensor* input : {&a, &b}) {
        if (!input->requires_grad()) continue;
        GradTarget target = grad_target(*input);
        detail::kernel("add", device, &KernelTable::write_grad)(target.tensor.device_data<float>(),
                                                                g.device_data<float>(), g.numel(),
                                                                target.accumulate, 1.0f);
      }
    });
  }
  return out;
}

Tensor relu(const Tensor& x) {
  check_input(x, "relu", "x");
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  detail::kernel("relu", device, &KernelTable::relu)(x.device_data<float>(),
                                                     out.device_data<float>(), out.numel());
  if (needs_grad({&x})) {
    out.set_requires_grad(true);
    // y = max(x, 0): dx = g where y > 0 (the kink at 0 gets 0, as in PyTorch).
    record_backward(out, [x, out, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      GradTarget target = grad_target(x);
      detail::kernel("relu", device, &KernelTable::relu_backward)(
          out.device_data<float>(), g.device_data<float>(), target.tensor.device_data<float>(),
          g.numel(), target.accumulate);
    });
  }
  return out;
}

namespace {

// y = f(x) element by element, with dx (+)= g f'(x) from the kept input.
Tensor smooth_activation(const Tensor& x, const char* op,
                         decltype(KernelTable::gelu) KernelTable::*forward,
                         decltype(KernelTable::gelu_backward) KernelTable::*backward) {
  check_input(x, op, "x");
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  detail::kernel(op, device, forward)(x.device_data<float>(), out.device_data<float>(),
                                      out.numel());
  if (needs_grad({&x})) {
    out.set_requires_grad(true);
    record_backward(out, [x, out, device, op, backward] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      GradTarget target = grad_target(x);
      detail::kernel(op, device, backward)(x.device_data<float>(), g.device_data<float>(),
                                           target.tensor.device_data<float>(), g.numel(),
                                           target.accumulate);
    });
  }
  return out;
}

}  // namespace

Tensor gelu(const Tensor& x) {
  return smooth_activation(x, "gelu", &KernelTable::gelu, &KernelTable::gelu_backward);
}

Tensor swish(const Tensor& x) {
  return smooth_activation(x, "swish", &KernelTable::swish, &KernelTable::swish_backward);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  TFM_CHECK(x.defined(), "reshape: x is undefined");
  TFM_CHECK(shape.numel() == x.numel(), "reshape: cannot view {} ({} elements) as {} ({} elements)",
            x.describe(), x.numel(), shape.str(), shape.numel());
  Tensor out = x.view(shape);
  if (needs_grad({&x})) {
    check_input(x, "reshape", "x");  // gradients are f32
    out.set_requires_grad(true);
    const Device device = x.device();
    // The same elements in another shape: dx = g read in x's shape.
    record_backward(out, [x, out, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      GradTarget target = grad_target(x);
      detail::kernel("reshape", device, &KernelTable::write_grad)(
          target.tensor.device_data<float>(), g.device_data<float>(), g.numel(), target.accumulate,
          1.0f);
    });
  }
  return out;
}

}  // namespace tfm::internal::ops
