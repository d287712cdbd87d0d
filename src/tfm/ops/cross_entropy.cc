#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/cross_entropy_cpu.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::ops {

using detail::check_input;

CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, float label_smoothing,
                                 int32_t ignore_index, double normalizer) {
  check_input(logits, "cross_entropy", "logits");
  check_input(targets, "cross_entropy", "targets", DType::i32);
  TFM_CHECK(logits.rank() == 2 && logits.dim(1) > 0,
            "cross_entropy: logits must be [rows, vocabulary], got {}", logits.describe());
  TFM_CHECK(targets.rank() == 1 && targets.dim(0) == logits.dim(0),
            "cross_entropy: targets must be [{}] for logits {}, got {}", logits.dim(0),
            logits.describe(), targets.describe());
  TFM_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
            "cross_entropy: label smoothing {} is outside [0, 1]", label_smoothing);
  const Device device = detail::op_device("cross_entropy", logits, targets);
  detail::require_cpu_body("cross_entropy", device);  // the targets are checked on the host
  const int64_t rows = logits.dim(0);
  const int64_t vocab = logits.dim(1);
  const int32_t* y = targets.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    TFM_CHECK(y[r] == ignore_index || (y[r] >= 0 && y[r] < vocab),
              "cross_entropy: target {} of row {} is outside the vocabulary of size {} (and is "
              "not the ignore index {})",
              y[r], r, vocab, ignore_index);

  Tensor lse = Tensor::empty({rows}, DType::f32, device);
  cpu::CrossEntropySums sums;
  TFM_DISPATCH("cross_entropy", device,
               sums = cpu::cross_entropy(logits.data<float>(), y, rows, vocab, label_smoothing,
                                         ignore_index, lse.data<float>()));
  // The default normalizer is the mean over counted rows. With no counted row the loss is 0 (not
  // PyTorch's 0/0 = NaN), so a batch of padding cannot poison training.
  double norm = normalizer > 0 ? normalizer : static_cast<double>(sums.tokens);
  if (norm <= 0) norm = 1;

  CrossEntropyResult result;
  result.loss = Tensor::full(Shape{}, static_cast<float>(sums.loss / norm));
  result.tokens = sums.tokens;
  result.nll_sum = sums.nll;
  if (needs_grad({&logits})) {
    Tensor& out = result.loss;
    out.set_requires_grad(true);
    // loss = sum over counted rows of loss_row / norm: dz = g / norm * (softmax(z) - q) on counted
    // rows (derived in kernels/cpu/cross_entropy_cpu.cc), 0 on ignored ones.
    record_backward(out, [logits, targets, lse, out, label_smoothing, ignore_index, norm, device] {
      Tensor g = out.grad();
      if (!g.defined()) return;
      const float scale = static_cast<float>(g.data<float>()[0] / norm);
      GradTarget target = grad_target(logits);
      TFM_DISPATCH("cross_entropy", device,
                   cpu::cross_entropy_backward(logits.data<float>(), targets.data<int32_t>(),
                                               lse.data<float>(), logits.dim(0), logits.dim(1),
                                               label_smoothing, ignore_index, scale,
                                               target.tensor.data<float>(), target.accumulate));
    });
  }
  return result;
}

}  // namespace tfm::ops
