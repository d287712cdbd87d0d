// ops::output_cross_entropy: the pre-softmax projection and the label-smoothed cross-entropy in
// chunks of rows, so that the [N, V] logits (606 MB for 4096 tokens and 37000 words in f32, as much
// again for their gradient) never exist at once.
//
// With z = h W^T, loss = (1 / norm) sum_r loss_r(z_r) and an upstream gradient g (a scalar):
//   dz_r = g / norm * (softmax(z_r) - q_r)      (0 on ignored rows; kernels/cpu/cross_entropy_cpu)
//   dh   = dz W,   dW = dz^T h = sum over chunks c of dz_c^T h_c.
// dz is linear in g: dz = g * D with D = (softmax(z) - q) / norm, which does not depend on g. So
// the forward computes D chunk by chunk while the chunk's logits are at hand, and with it the
// per-unit gradients dH = D W and dW1 = D^T h; the backward only scales them by g. This is exact,
// not an approximation: it is the same sum of products, taken before g is known.
#include <algorithm>
#include <utility>

#include "tfm/autograd/tape.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::ops {

namespace {

using detail::KernelTable;
using kernels::GemmArgs;
using kernels::GemmOperand;

// Rows per chunk by default: the most whose f32 logits fit in kChunkBytes, in multiples of 64 (512
// rows for 37000 words: 76 MB, an eighth of the full logits for 4096 tokens). On 2 cores oneDNN's
// three products per chunk run at ~85% of their 1024-row rate at 256 rows and ~100% at 512 (the dW
// product's inner dimension is the chunk's row count).
// On a GPU the chunk is not about caches but about the products' efficiency (a product with 512
// rows runs well below the device's rate) and the device's memory: 1 GiB of f32 logits (7168 rows
// for 37000 words; a batch of 25000 target tokens in 4 chunks).
constexpr int64_t kChunkBytes = int64_t{80} << 20;
constexpr int64_t kDeviceChunkBytes = int64_t{1} << 30;
constexpr int64_t kChunkMultiple = 64;

int64_t default_chunk_rows(int64_t vocab, Device device) {
  const int64_t bytes = device == Device::cpu ? kChunkBytes : kDeviceChunkBytes;
  int64_t rows = bytes / (vocab * static_cast<int64_t>(sizeof(float)));
  return std::max(kChunkMultiple, rows / kChunkMultiple * kChunkMultiple);
}

// Rows [first, first + count) of t as a product operand, in t's device memory.
GemmOperand rows_of(const Tensor& t, int64_t first, int64_t count, int64_t cols) {
  const char* base = static_cast<const char*>(t.device_raw()) +
                     static_cast<size_t>(first * cols) * dtype_size(t.dtype());
  return GemmOperand::dense(base, t.dtype(), {count, cols});
}

void run_gemm(Device device, const GemmOperand& a, const GemmOperand& b, const GemmOperand& c,
              bool accumulate) {
  GemmArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  args.accumulate = accumulate;
  detail::kernel("output_cross_entropy", device, &KernelTable::gemm)(args);
}

}  // namespace

int64_t output_cross_entropy_chunk_rows(int64_t vocab, Device device) {
  TFM_CHECK(vocab > 0, "output_cross_entropy: vocabulary of {} words", vocab);
  return default_chunk_rows(vocab, device);
}

CrossEntropyResult output_cross_entropy(const Tensor& hidden, const Tensor& weight,
                                        const Tensor& targets, float label_smoothing,
                                        int32_t ignore_index, double normalizer, int64_t chunk_rows,
                                        DType product) {
  constexpr const char* kOp = "output_cross_entropy";
  detail::check_input(hidden, kOp, "hidden");
  detail::check_input(weight, kOp, "weight");
  detail::check_input(targets, kOp, "targets", DType::i32);
  TFM_CHECK(weight.rank() == 2 && weight.dim(0) > 0, "{}: weight must be [vocabulary, d], got {}",
            kOp, weight.describe());
  TFM_CHECK(hidden.rank() >= 1 && hidden.dim(-1) == weight.dim(1),
            "{}: hidden {} does not fit weight {} (expected hidden [..., {}])", kOp,
            hidden.describe(), weight.describe(), weight.dim(1));
  const int64_t d = weight.dim(1), vocab = weight.dim(0);
  const int64_t rows = d == 0 ? 0 : hidden.numel() / d;
  TFM_CHECK(targets.rank() == 1 && targets.dim(0) == rows,
            "{}: targets must be [{}] for hidden {}, got {}", kOp, rows, hidden.describe(),
            targets.describe());
  TFM_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
            "{}: label smoothing {} is outside [0, 1]", kOp, label_smoothing);
  TFM_CHECK(product == DType::f32 || product == DType::bf16,
            "{}: products in {} are not supported (f32 or bf16)", kOp, dtype_name(product));
  TFM_CHECK(chunk_rows >= 0, "{}: chunk_rows must be >= 0 (0: the default), got {}", kOp,
            chunk_rows);
  const Device device = detail::op_device(kOp, hidden, weight, targets);
  // The targets are checked and counted on the host (on a GPU this copy waits for the queued
  // forward); the kernels read the device's copy (in host memory: the same).
  const Tensor host_targets = targets.to(Device::cpu);
  const int32_t* y = host_targets.data<int32_t>();
  const int32_t* device_y = targets.device_data<int32_t>();
  int64_t tokens = 0;
  for (int64_t r = 0; r < rows; ++r) {
    TFM_CHECK(y[r] == ignore_index || (y[r] >= 0 && y[r] < vocab),
              "{}: target {} of row {} is outside the vocabulary of size {} (and is not the "
              "ignore index {})",
              kOp, y[r], r, vocab, ignore_index);
    tokens += y[r] != ignore_index;
  }
  // As ops::cross_entropy: the mean over counted rows by default, and a loss of 0 (not 0/0) when
  // no row counts. The normalizer is known before any logit, which the gradient below needs.
  double norm = normalizer > 0 ? normalizer : static_cast<double>(tokens);
  if (norm <= 0) norm = 1;

  const bool want_dh = needs_grad({&hidden}), want_dw = needs_grad({&weight});
  const bool want_grad = want_dh || want_dw;
  // For bf16 products both products' operands are bf16, as ops::linear's: the hidden states and
  // the weight converted once here; logits and gradients stay f32.
  const bool bf16_product = product == DType::bf16;
  Tensor h_op = bf16_product ? to_bf16(hidden) : hidden;
  Tensor w_op = bf16_product ? to_bf16(weight) : weight;
  const int64_t chunk =
      std::min(rows, chunk_rows > 0 ? chunk_rows : default_chunk_rows(vocab, device));

  // Per-row (loss, nll), summed in row order at the end: the totals do not depend on the chunk
  // size or the thread count, and equal ops::cross_entropy's.
  Tensor row_stats = Tensor::empty({rows, 2}, DType::f32, device);
  Tensor logits = Tensor::empty({chunk, vocab}, DType::f32, device);
  // The chunk's D overwrites its logits; under bf16 the products read a bf16 copy, which the loss
  // kernel writes instead (a GPU's then leaves the f32 logits as they are).
  Tensor dz_bf16 =
      want_grad && bf16_product ? Tensor::empty({chunk, vocab}, DType::bf16, device) : Tensor{};
  Tensor dhidden = want_dh ? Tensor::empty(hidden.shape(), DType::f32, device) : Tensor{};
  Tensor dweight = want_dw ? Tensor::empty(weight.shape(), DType::f32, device) : Tensor{};
  const float unit_scale = static_cast<float>(1.0 / norm);

  for (int64_t first = 0; first < rows; first += chunk) {
    const int64_t count = std::min(chunk, rows - first);
    GemmOperand h_rows = rows_of(h_op, first, count, d);
    // z = h W^T for the chunk's rows.
    run_gemm(device, h_rows,
             GemmOperand::dense(w_op.device_raw(), w_op.dtype(), {vocab, d}).transposed(),
             rows_of(logits, 0, count, vocab), false);
    float* stats = row_stats.device_data<float>() + 2 * first;
    if (!want_grad) {
      detail::kernel(kOp, device, &KernelTable::cross_entropy_rows)(
          logits.device_data<float>(), device_y + first, count, vocab, label_smoothing,
          ignore_index, stats, nullptr);
      continue;
    }
    // The chunk's logits become D (and its bf16 copy for bf16 products) row by row.
    bf16* dz_copy = bf16_product ? dz_bf16.device_data<bf16>() : nullptr;
    detail::kernel(kOp, device, &KernelTable::cross_entropy_rows_with_grad)(
        logits.device_data<float>(), device_y + first, count, vocab, label_smoothing, ignore_index,
        unit_scale, stats, dz_copy);
    GemmOperand dz_rows = rows_of(bf16_product ? dz_bf16 : logits, 0, count, vocab);
    if (want_dh) {
      // dH (chunk rows) = D W: [count, V] @ [V, d].
      run_gemm(device, dz_rows, GemmOperand::dense(w_op.device_raw(), w_op.dtype(), {vocab, d}),
               rows_of(dhidden, first, count, d), false);
    }
    if (want_dw) {
      // dW1 += D^T h: [V, count] @ [count, d], the first chunk overwriting.
      run_gemm(device, dz_rows.transposed(), h_rows,
               GemmOperand::dense(dweight.device_raw(), DType::f32, {vocab, d}), first > 0);
    }
  }
  if (want_dw && rows == 0) fill_in_place({dweight}, 0.0f);

  CrossEntropyResult result;
  double loss_sum = 0;
  const Tensor host_stats = row_stats.to(Device::cpu);  // on a GPU: waits for the loss
  const float* stats = host_stats.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] == ignore_index) continue;
    loss_sum += stats[2 * r];
    result.nll_sum += stats[2 * r + 1];
  }
  result.tokens = tokens;
  result.loss = Tensor::full(Shape{}, static_cast<float>(loss_sum / norm));
  if (!want_grad) return result;

  Tensor& out = result.loss;
  out.set_requires_grad(true);
  // d(hidden) = g dH and d(weight) = g dW1 (see the top of this file). The loss is a host scalar
  // whatever the device (its gradient, g, too); dH and dW1 stay on the device.
  record_backward(out, [out, hidden, weight, dhidden, dweight, device] {
    Tensor g = out.grad();
    if (!g.defined()) return;
    const float scale = g.to(Device::cpu).data<float>()[0];
    for (const auto& [input, unit] : {std::pair{&hidden, &dhidden}, std::pair{&weight, &dweight}}) {
      if (!unit->defined()) continue;
      GradTarget target = grad_target(*input);
      detail::kernel("output_cross_entropy", device, &KernelTable::write_grad)(
          target.tensor.device_data<float>(), unit->device_data<float>(), unit->numel(),
          target.accumulate, scale);
    }
  });
  return result;
}

}  // namespace tfm::internal::ops
