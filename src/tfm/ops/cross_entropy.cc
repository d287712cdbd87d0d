#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/cross_entropy_cpu.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

#ifdef TFM_HAVE_CUDA
#include <cstring>

#include "tfm/kernels/cuda/cross_entropy_cuda.h"
#endif

namespace tfm::ops {

using detail::check_input;

#ifdef TFM_HAVE_CUDA
namespace {
// The sums of cuda::cross_entropy, on the host: the one copy of the op, which waits for the
// stream (the API returns tokens and nll_sum as host numbers). The kernels skip targets outside the
// vocabulary and count them; tokens < 0 says there was one.
cpu::CrossEntropySums device_cross_entropy(const Tensor& logits, const Tensor& targets,
                                           float label_smoothing, int32_t ignore_index,
                                           const Tensor& lse, Device device) {
  const int64_t rows = logits.dim(0);
  Tensor row_loss_nll = Tensor::empty({rows, 2}, DType::f32, device);
  // cuda::kSumCount doubles, in an f32 tensor of twice as many elements (tfm has no f64).
  Tensor device_sums = Tensor::empty({2 * cuda::kSumCount}, DType::f32, device);
  TFM_DISPATCH_CUDA("cross_entropy", device, (void)0,
                    cuda::cross_entropy(logits.device_data<float>(), targets.device_data<int32_t>(),
                                        rows, logits.dim(1), label_smoothing, ignore_index,
                                        lse.device_data<float>(), row_loss_nll.device_data<float>(),
                                        static_cast<double*>(device_sums.device_raw())));
  double host[cuda::kSumCount];
  const Tensor host_sums = device_sums.to(Device::cpu);
  std::memcpy(host, host_sums.raw(), sizeof(host));
  cpu::CrossEntropySums sums;
  sums.loss = host[cuda::kLossSum];
  sums.nll = host[cuda::kNllSum];
  sums.tokens = host[cuda::kBadTargets] > 0 ? -1 : static_cast<int64_t>(host[cuda::kTokens]);
  return sums;
}
}  // namespace
#endif

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

  Tensor lse = Tensor::empty({rows}, DType::f32, device);
  cpu::CrossEntropySums sums;
  if (device == Device::cpu) {
    // The targets are checked on the host before the kernel reads them.
    const int32_t* y = targets.data<int32_t>();
    for (int64_t r = 0; r < rows; ++r) check_target(y, r);
    sums = cpu::cross_entropy(logits.data<float>(), y, rows, vocab, label_smoothing, ignore_index,
                              lse.data<float>());
  } else {
#ifdef TFM_HAVE_CUDA
    sums = device_cross_entropy(logits, targets, label_smoothing, ignore_index, lse, device);
    if (sums.tokens < 0) {  // a bad target: find it on the host for the message
      const Tensor host_targets = targets.to(Device::cpu);
      for (int64_t r = 0; r < rows; ++r) check_target(host_targets.data<int32_t>(), r);
    }
#else
    detail::no_kernel("cross_entropy", device);
#endif
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
      if (device == Device::cpu) {
        const float scale = static_cast<float>(g.data<float>()[0] / norm);
        cpu::cross_entropy_backward(logits.data<float>(), targets.data<int32_t>(),
                                    lse.data<float>(), logits.dim(0), logits.dim(1),
                                    label_smoothing, ignore_index, scale,
                                    target.tensor.data<float>(), target.accumulate);
        return;
      }
      // The upstream gradient stays on the device: the kernel scales by g / norm there.
      TFM_DISPATCH_CUDA(
          "cross_entropy", device, (void)0,
          cuda::cross_entropy_backward(
              logits.device_data<float>(), targets.device_data<int32_t>(), lse.device_data<float>(),
              logits.dim(0), logits.dim(1), label_smoothing, ignore_index,
              static_cast<float>(1.0 / norm), target.tensor.device_data<float>(), target.accumulate,
              g.device_data<float>()));
    });
  }
  return result;
}

}  // namespace tfm::ops
