// Where LayerNorm's backward writes (shared by ops::layer_norm and ops::add_dropout_layer_norm):
// the grad targets of x, gamma and beta, for each of them that requires a gradient. The pointers
// are the tensors' device addresses (the op's device: its kernel reads them).
#pragma once

#include "tfm/autograd/tape.h"
#include "tfm/kernels/kernel_args.h"
#include "tfm/ops/dispatch.h"

namespace tfm::internal::ops {

inline kernels::LayerNormGrads layer_norm_grad_targets(const Tensor& x, const Tensor& gamma,
                                                       const Tensor& beta) {
  kernels::LayerNormGrads grads;
  if (x.requires_grad()) {
    GradTarget t = grad_target(x);
    grads.dx = t.tensor.device_data<float>();
    grads.dx_accumulate = t.accumulate;
  }
  if (gamma.requires_grad()) {
    GradTarget t = grad_target(gamma);
    grads.dgamma = t.tensor.device_data<float>();
    grads.dgamma_accumulate = t.accumulate;
  }
  if (beta.requires_grad()) {
    GradTarget t = grad_target(beta);
    grads.dbeta = t.tensor.device_data<float>();
    grads.dbeta_accumulate = t.accumulate;
  }
  return grads;
}

// The backwards' scratch for gamma's and beta's per-chunk sums (a device kernel's; the table's
// layer_norm_backward_workspace), kept alive by the op until its kernels are queued. Undefined
// when the backend wants none and when neither gradient is wanted.
inline Tensor layer_norm_workspace(const kernels::KernelTable& backend,
                                   const kernels::LayerNormGrads& grads, int64_t rows, int64_t d,
                                   Device device) {
  if (grads.dgamma == nullptr && grads.dbeta == nullptr) return {};
  return detail::workspace(backend.layer_norm_backward_workspace, DType::f32, device, rows, d);
}

}  // namespace tfm::internal::ops
