#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

using detail::check_input;
using detail::KernelTable;

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
  const int64_t rows = logits.dim(0);
  const int64_t vocab = logits.dim(1);
  const auto check_target = [&](const int32_t* y, int64_t r) {
    TFM_CHECK(y[r] == ignore_index || (y[r] >= 0 && y[r] < vocab),
              "cross_entropy: target {} of row {} is outside the vocabulary of size {} (and is "
              "not the ignore index {})",
              y[r], r, vocab, ignore_index);
  };

  const KernelTable& backend = detail::kernels_for("cross_entropy", device);
  Tensor lse = Tensor::empty({rows}, DType::f32, device);
  // In host memory the targets are checked before the kernel reads them; elsewhere the kernel
  // skips and counts a bad one, then the host finds it for the message.
  if (backend.host_memory) {
    const int32_t* y = targets.data<int32_t>();
    for (int64_t r = 0; r < rows; ++r) check_target(y, r);
  }
  const kernels::CrossEntropySums sums =
      detail::entry("cross_entropy", device, backend.cross_entropy)(
          logits.device_data<float>(), targets.device_data<int32_t>(), rows, vocab, label_smoothing,
          ignore_index, lse.device_data<float>());
  if (sums.tokens < 0) {
    const Tensor host_targets = targets.to(Device::cpu);
    for (int64_t r = 0; r < rows; ++r) check_target(host_targets.data<int32_t>(), r);
  }
  // The default normalizer is the mean over counted rows. With no counted row the loss is 0 (not
  // PyTorch's 0/0 = NaN), so a batch of padding cannot poison training.
  double norm = normalizer > 0 ? normalizer : static_cast<double>(sums.tokens);
  if (norm <= 0) norm = 1;

  CrossEntropyResult result;
  result.loss = Tensor::full(Shape{}, static_cast<float>(sums.loss / norm)).to(device);
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
      GradTarget target = grad_target(logits);
      // g stays where it is: the kernel scales by g / norm on its device.
      detail::kernel("cross_entropy", device, &KernelTable::cross_entropy_backward)(
          logits.device_data<float>(), targets.device_data<int32_t>(), lse.device_data<float>(),
          logits.dim(0), logits.dim(1), label_smoothing, ignore_index, norm, g.device_data<float>(),
          target.tensor.device_data<float>(), target.accumulate);
    });
  }
  return result;
}

}  // namespace tfm::internal::ops
