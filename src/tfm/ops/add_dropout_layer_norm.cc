// ops::add_dropout_layer_norm: LayerNorm(x + Dropout(branch)), the end of every post-norm
// sub-layer, in one pass over the rows. Besides saving the passes of a separate dropout and add, it
// keeps less for the backward: only the sum s (LayerNorm's input, which the unfused ops keep as
// well), not the dropped branch that the unfused add holds on to. ops::add_dropout_then_layer_norm
// is the same pass for a pre-norm stream, where s itself goes on to the next sub-layer.
#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/layer_norm_grads.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::check_input;
using detail::KernelTable;

namespace {

// Both ops: s = x + Dropout(branch), y = LayerNorm(s); `sum_is_output`: s carries a gradient of
// its own (the pre-norm stream), which the backward adds to LayerNorm's input gradient.
SumAndNorm fused_sum_and_norm(const char* op, const Tensor& x, const Tensor& branch, float p,
                              uint64_t seed, const Tensor& gamma, const Tensor& beta, float eps,
                              bool sum_is_output) {
  check_input(x, op, "x");
  check_input(branch, op, "branch");
  check_input(gamma, op, "gamma");
  check_input(beta, op, "beta");
  TFM_CHECK(x.shape() == branch.shape() && x.rank() >= 1,
            "{}: x {} and branch {} must have one shape of rank >= 1", op, x.describe(),
            branch.describe());
  const int64_t d = x.dim(-1);
  TFM_CHECK(gamma.shape() == Shape{d} && beta.shape() == Shape{d},
            "{}: gamma {} and beta {} must both be [{}] for x {}", op, gamma.describe(),
            beta.describe(), d, x.describe());
  TFM_CHECK(p >= 0.0f && p < 1.0f, "{}: dropout probability {} is outside [0, 1)", op, p);
  TFM_CHECK(eps > 0.0f, "{}: eps must be positive, got {}", op, eps);
  const int64_t rows = d == 0 ? 0 : x.numel() / d;

  const Device device = detail::op_device(op, x, branch, gamma, beta);
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  // Without a backward (decoding) nothing reads s after the norm, unless it is the stream: the
  // kernel then writes each row of s where its normalised row goes (a row is read whole, for its
  // mean and variance, before it is overwritten), which spares a buffer whose lines would be
  // written once and never read again.
  const bool keep_sum = sum_is_output || needs_grad({&x, &branch, &gamma, &beta});
  Tensor sum = keep_sum ? Tensor::empty(x.shape(), DType::f32, device) : out;
  Tensor mean = Tensor::empty({rows}, DType::f32, device);
  Tensor rstd = Tensor::empty({rows}, DType::f32, device);
  detail::kernel(op, device, &KernelTable::add_dropout_layer_norm)(
      x.device_data<float>(), branch.device_data<float>(), p, seed, gamma.device_data<float>(),
      beta.device_data<float>(), sum.device_data<float>(), out.device_data<float>(),
      mean.device_data<float>(), rstd.device_data<float>(), rows, d, eps);
  if (!needs_grad({&x, &branch, &gamma, &beta})) return {keep_sum ? sum : Tensor{}, out};

  out.set_requires_grad(true);
  if (sum_is_output) sum.set_requires_grad(true);
  // s = x + m * branch / (1 - p), y = LayerNorm(s): ds is LayerNorm's input gradient
  // (kernels/cpu/layer_norm_cpu.cc) plus s's own when it is an output, dx = ds, d(branch) = m * ds
  // / (1 - p) with the mask m recomputed from the seed.
  record_backward(out, [op, x, branch, gamma, beta, sum, mean, rstd, out, p, seed, rows, d, device,
                        sum_is_output] {
    Tensor g = out.grad();
    const Tensor g_sum = sum_is_output ? sum.grad() : Tensor{};
    if (!g.defined() && !g_sum.defined()) return;
    // Only the stream was used further: nothing comes through the norm.
    if (!g.defined()) g = Tensor::zeros(out.shape(), DType::f32, device);
    const KernelTable& backend = detail::kernels_for(op, device);
    kernels::LayerNormGrads grads = layer_norm_grad_targets(x, gamma, beta);
    if (g_sum.defined()) grads.residual = g_sum.device_data<float>();
    float* dbranch = nullptr;
    bool dbranch_accumulate = false;
    if (branch.requires_grad()) {
      GradTarget t = grad_target(branch);
      dbranch = t.tensor.device_data<float>();
      dbranch_accumulate = t.accumulate;
    }
    Tensor workspace = layer_norm_workspace(backend, grads, rows, d, device);
    detail::entry(op, device, backend.add_dropout_layer_norm_backward)(
        sum.device_data<float>(), gamma.device_data<float>(), mean.device_data<float>(),
        rstd.device_data<float>(), g.device_data<float>(), rows, d, p, seed, grads, dbranch,
        dbranch_accumulate, detail::data_or_null<float>(workspace));
  });
  return {sum, out};
}

}  // namespace

Tensor add_dropout_layer_norm(const Tensor& x, const Tensor& branch, float p, uint64_t seed,
                              const Tensor& gamma, const Tensor& beta, float eps) {
  return fused_sum_and_norm("add_dropout_layer_norm", x, branch, p, seed, gamma, beta, eps, false)
      .normed;
}

SumAndNorm add_dropout_then_layer_norm(const Tensor& x, const Tensor& branch, float p,
                                       uint64_t seed, const Tensor& gamma, const Tensor& beta,
                                       float eps) {
  return fused_sum_and_norm("add_dropout_then_layer_norm", x, branch, p, seed, gamma, beta, eps,
                            true);
}

}  // namespace tfm::internal::ops
