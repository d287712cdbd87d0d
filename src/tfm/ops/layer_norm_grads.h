// Where LayerNorm's backward writes (shared by ops::layer_norm and ops::add_dropout_layer_norm):
// the grad targets of x, gamma and beta, for each of them that requires a gradient.
#pragma once

#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/layer_norm_cpu.h"

namespace tfm::ops {

inline cpu::LayerNormGrads layer_norm_grad_targets(const Tensor& x, const Tensor& gamma,
                                                   const Tensor& beta) {
  cpu::LayerNormGrads grads;
  if (x.requires_grad()) {
    GradTarget t = grad_target(x);
    grads.dx = t.tensor.data<float>();
    grads.dx_accumulate = t.accumulate;
  }
  if (gamma.requires_grad()) {
    GradTarget t = grad_target(gamma);
    grads.dgamma = t.tensor.data<float>();
    grads.dgamma_accumulate = t.accumulate;
  }
  if (beta.requires_grad()) {
    GradTarget t = grad_target(beta);
    grads.dbeta = t.tensor.data<float>();
    grads.dbeta_accumulate = t.accumulate;
  }
  return grads;
}

}  // namespace tfm::ops
