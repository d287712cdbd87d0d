// ops::output_cross_entropy: the pre-softmax projection and the label-smoothed cross-entropy in
// chunks of rows, so that the [N, V] logits (606 MB for 4096 tokens and 37000 words in f32, as much
// again for their gradient) never exist at once.
//
// With z = h W^T, loss = (1 / norm) sum_r loss_r(z_r) and an upstream gradient g (a scalar):
//   dz_r = g / norm * (softmax(z_r) - q_r)      (0 on ignored rows; kernels/cpu/cross_entropy_cpu)
//   dh   = dz W,   dW = dz^T h = sum over chunks c of dz_c^T h_c.
// R-Drop's pairs (paired_output_cross_entropy) take a chunk of rows with the chunk of their pairs,
// so that each row's consistency term and its gradient are computed with both rows' logits at hand.
// dz is linear in g: dz = g * D with D = (softmax(z) - q) / norm, which does not depend on g. So
// the forward computes D chunk by chunk while the chunk's logits are at hand, and with it the
// per-unit gradients dH = D W and dW1 = D^T h; the backward only scales them by g. This is exact,
// not an approximation: it is the same sum of products, taken before g is known.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

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

namespace {

// output_cross_entropy and paired_output_cross_entropy: one loop over chunks of rows. A chunk is
// `count` rows from `first` on, and with pairs (consistency != nullptr: its weight) also the rows
// from first + N/2 on, whose logits sit `chunk` rows after the first ones' in the buffers.
CrossEntropyResult chunked_output_loss(const char* op, const Tensor& hidden, const Tensor& weight,
                                       const Tensor& targets, float label_smoothing,
                                       int32_t ignore_index, const float* consistency,
                                       double normalizer, int64_t chunk_rows, DType product) {
  detail::check_input(hidden, op, "hidden");
  detail::check_input(weight, op, "weight");
  detail::check_input(targets, op, "targets", DType::i32);
  TFM_CHECK(weight.rank() == 2 && weight.dim(0) > 0, "{}: weight must be [vocabulary, d], got {}",
            op, weight.describe());
  TFM_CHECK(hidden.rank() >= 1 && hidden.dim(-1) == weight.dim(1),
            "{}: hidden {} does not fit weight {} (expected hidden [..., {}])", op,
            hidden.describe(), weight.describe(), weight.dim(1));
  const int64_t d = weight.dim(1), vocab = weight.dim(0);
  const int64_t rows = d == 0 ? 0 : hidden.numel() / d;
  TFM_CHECK(targets.rank() == 1 && targets.dim(0) == rows,
            "{}: targets must be [{}] for hidden {}, got {}", op, rows, hidden.describe(),
            targets.describe());
  TFM_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
            "{}: label smoothing {} is outside [0, 1]", op, label_smoothing);
  TFM_CHECK(product == DType::f32 || product == DType::bf16,
            "{}: products in {} are not supported (f32 or bf16)", op, dtype_name(product));
  TFM_CHECK(chunk_rows >= 0, "{}: chunk_rows must be >= 0 (0: the default), got {}", op,
            chunk_rows);
  const bool paired = consistency != nullptr;
  if (paired) {
    TFM_CHECK(rows % 2 == 0, "{}: {} rows cannot be two passes of the same rows", op, rows);
    TFM_CHECK(std::isfinite(*consistency) && *consistency >= 0.0f,
              "{}: the consistency weight must be finite and >= 0, got {}", op, *consistency);
  }
  const Device device = detail::op_device(op, hidden, weight, targets);
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
              op, y[r], r, vocab, ignore_index);
    tokens += y[r] != ignore_index;
  }
  const int64_t half = rows / 2;
  if (paired) {
    for (int64_t r = 0; r < half; ++r)
      TFM_CHECK(y[r] == y[half + r], "{}: target {} of row {} differs from its pair's, {} (row {})",
                op, y[r], r, y[half + r], half + r);
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
  // The rows each chunk starts from: all of them, or the first of each pair (a chunk of pairs
  // holds twice its rows' logits, so it takes half the rows by default).
  const int64_t chunk_starts = paired ? half : rows;
  int64_t default_chunk = default_chunk_rows(vocab, device);
  if (paired) default_chunk = std::max(kChunkMultiple, default_chunk / 2);
  const int64_t chunk = std::min(chunk_starts, chunk_rows > 0 ? chunk_rows : default_chunk);
  const int64_t buffer_rows = paired ? 2 * chunk : chunk;

  // Per-row (loss, nll) and the pairs' consistency terms, summed in row order at the end: the
  // totals do not depend on the chunk size or the thread count, and equal ops::cross_entropy's.
  Tensor row_stats = Tensor::empty({rows, 2}, DType::f32, device);
  Tensor pair_stats = Tensor::empty({paired ? half : 0}, DType::f32, device);
  Tensor logits = Tensor::empty({buffer_rows, vocab}, DType::f32, device);
  // The chunk's D overwrites its logits; under bf16 the products read a bf16 copy, which the loss
  // kernel writes instead (a GPU's then leaves the f32 logits as they are).
  Tensor dz_bf16 = want_grad && bf16_product
                       ? Tensor::empty({buffer_rows, vocab}, DType::bf16, device)
                       : Tensor{};
  Tensor dhidden = want_dh ? Tensor::empty(hidden.shape(), DType::f32, device) : Tensor{};
  Tensor dweight = want_dw ? Tensor::empty(weight.shape(), DType::f32, device) : Tensor{};
  const float unit_scale = static_cast<float>(1.0 / norm);
  const GemmOperand w_rows = GemmOperand::dense(w_op.device_raw(), w_op.dtype(), {vocab, d});

  for (int64_t first = 0; first < chunk_starts; first += chunk) {
    const int64_t count = std::min(chunk, chunk_starts - first);
    // (row of hidden, row of the logits buffer) of each group of `count` rows in this chunk.
    std::vector<std::pair<int64_t, int64_t>> groups = {{first, 0}};
    if (paired) groups.emplace_back(half + first, chunk);
    // z = h W^T for the chunk's rows.
    for (const auto& [row, at] : groups)
      run_gemm(device, rows_of(h_op, row, count, d), w_rows.transposed(),
               rows_of(logits, at, count, vocab), false);
    float* z = logits.device_data<float>();
    float* stats = row_stats.device_data<float>();
    // The chunk's logits become D (and its bf16 copy for bf16 products) row by row.
    bf16* dz_copy = want_grad && bf16_product ? dz_bf16.device_data<bf16>() : nullptr;
    if (paired) {
      detail::kernel(op, device, &KernelTable::paired_cross_entropy_rows_with_grad)(
          z, z + chunk * vocab, device_y + first, count, vocab, label_smoothing, ignore_index,
          unit_scale, *consistency, stats + 2 * first, stats + 2 * (half + first),
          pair_stats.device_data<float>() + first, dz_copy,
          dz_copy ? dz_copy + chunk * vocab : nullptr);
    } else if (want_grad) {
      detail::kernel(op, device, &KernelTable::cross_entropy_rows_with_grad)(
          z, device_y + first, count, vocab, label_smoothing, ignore_index, unit_scale,
          stats + 2 * first, dz_copy);
    } else {
      detail::kernel(op, device, &KernelTable::cross_entropy_rows)(
          z, device_y + first, count, vocab, label_smoothing, ignore_index, stats + 2 * first,
          nullptr);
    }
    if (!want_grad) continue;
    for (size_t g = 0; g < groups.size(); ++g) {
      const auto [row, at] = groups[g];
      GemmOperand dz_rows = rows_of(bf16_product ? dz_bf16 : logits, at, count, vocab);
      // dH (the group's rows) = D W: [count, V] @ [V, d].
      if (want_dh) run_gemm(device, dz_rows, w_rows, rows_of(dhidden, row, count, d), false);
      // dW1 += D^T h: [V, count] @ [count, d], the first group of the first chunk overwriting.
      if (want_dw)
        run_gemm(device, dz_rows.transposed(), rows_of(h_op, row, count, d),
                 GemmOperand::dense(dweight.device_raw(), DType::f32, {vocab, d}),
                 first > 0 || g > 0);
    }
  }
  if (want_dw && chunk_starts == 0) fill_in_place({dweight}, 0.0f);

  CrossEntropyResult result;
  double loss_sum = 0;
  const Tensor host_stats = row_stats.to(Device::cpu);  // on a GPU: waits for the loss
  const float* stats = host_stats.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    if (y[r] == ignore_index) continue;
    loss_sum += stats[2 * r];
    result.nll_sum += stats[2 * r + 1];
  }
  if (paired) {
    const Tensor host_pairs = pair_stats.to(Device::cpu);
    const float* kl = host_pairs.data<float>();
    for (int64_t r = 0; r < half; ++r)
      if (y[r] != ignore_index) result.consistency_sum += kl[r];
    loss_sum += static_cast<double>(*consistency) * result.consistency_sum;
  }
  result.tokens = tokens;
  result.loss = Tensor::full(Shape{}, static_cast<float>(loss_sum / norm));
  if (!want_grad) return result;

  Tensor& out = result.loss;
  out.set_requires_grad(true);
  // d(hidden) = g dH and d(weight) = g dW1 (see the top of this file). The loss is a host scalar
  // whatever the device (its gradient, g, too); dH and dW1 stay on the device.
  record_backward(out, [out, hidden, weight, dhidden, dweight, device, op] {
    Tensor g = out.grad();
    if (!g.defined()) return;
    const float scale = g.to(Device::cpu).data<float>()[0];
    for (const auto& [input, unit] : {std::pair{&hidden, &dhidden}, std::pair{&weight, &dweight}}) {
      if (!unit->defined()) continue;
      GradTarget target = grad_target(*input);
      detail::kernel(op, device, &KernelTable::write_grad)(target.tensor.device_data<float>(),
                                                           unit->device_data<float>(),
                                                           unit->numel(), target.accumulate, scale);
    }
  });
  return result;
}

}  // namespace

CrossEntropyResult output_cross_entropy(const Tensor& hidden, const Tensor& weight,
                                        const Tensor& targets, float label_smoothing,
                                        int32_t ignore_index, double normalizer, int64_t chunk_rows,
                                        DType product) {
  return chunked_output_loss("output_cross_entropy", hidden, weight, targets, label_smoothing,
                             ignore_index, nullptr, normalizer, chunk_rows, product);
}

CrossEntropyResult paired_output_cross_entropy(const Tensor& hidden, const Tensor& weight,
                                               const Tensor& targets, float label_smoothing,
                                               int32_t ignore_index, float consistency_weight,
                                               double normalizer, int64_t chunk_rows,
                                               DType product) {
  return chunked_output_loss("paired_output_cross_entropy", hidden, weight, targets,
                             label_smoothing, ignore_index, &consistency_weight, normalizer,
                             chunk_rows, product);
}

}  // namespace tfm::internal::ops
