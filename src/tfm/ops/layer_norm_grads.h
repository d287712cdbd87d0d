// Where LayerNorm's backward writes (shared by ops::layer_norm and ops::add_dropout_layer_norm):
// the grad targets of x, gamma and beta, for each of them that requires a gradient. The pointers
// are the tensors' device addresses (the op's device: the CPU or CUDA kernel reads them).
#pragma once

#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/layer_norm_cpu.h"
#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cuda/layer_norm_cuda.h"
#endif

namespace tfm::ops {

inline cpu::LayerNormGrads layer_norm_grad_targets(const Tensor& x, const Tensor& gamma,
                                                   const Tensor& beta) {
  cpu::LayerNormGrads grads;
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

// The CUDA backwards' scratch for gamma's and beta's per-chunk sums (layer_norm_cuda.h), kept
// alive by the op until its kernels are queued. Undefined on the CPU (its kernel allocates its
// own) and when neither gradient is wanted.
inline Tensor layer_norm_workspace(const cpu::LayerNormGrads& grads, int64_t rows, int64_t d,
                                   Device device) {
#ifdef TFM_HAVE_CUDA
  if (device == Device::cuda && (grads.dgamma != nullptr || grads.dbeta != nullptr)) {
    const int64_t floats = cuda::layer_norm_backward_workspace(rows, d);
    if (floats > 0) return Tensor::empty({floats}, DType::f32, device);
  }
#else
  (void)grads, (void)rows, (void)d, (void)device;
#endif
  return {};
}

inline float* device_floats_or_null(const Tensor& t) {
  return t.defined() ? t.device_data<float>() : nullptr;
}

}  // namespace tfm::ops
