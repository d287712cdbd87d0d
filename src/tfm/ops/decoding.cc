// The decoding ops: log-softmax, top-k and the fused output layer of a search step. Inference only:
// none records a backward.
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal::ops {

namespace {

using detail::KernelTable;

TopK empty_top_k(int64_t rows, int64_t k, Device device) {
  return {Tensor::empty({rows, k}, DType::f32, device),
          Tensor::empty({rows, k}, DType::i32, device), Tensor::empty({rows}, DType::i32, device)};
}
}  // namespace

namespace {

// A backend without the fused output layer (a GPU): the [rows, V] logits in one product
// (decoding has few rows: 128 x 37000 f32 is 19 MB), their log-softmax, then its top k. The packed
// form is the whole embedding, packed by the same backend in hidden's type.
TopK output_top_unfused(const Tensor& hidden, const Tensor& embedding, int64_t k, int64_t excluded,
                        const std::vector<std::shared_ptr<const PackedWeight>>& packed,
                        const float* bias) {
  constexpr const char* kOp = "output_log_softmax_top";
  const Device device = hidden.device();
  TFM_CHECK(packed.size() <= 1, "{}: a GPU multiplies the whole embedding as one block", kOp);
  const int64_t rows = hidden.dim(0), vocab = embedding.dim(0), d = hidden.dim(1);
  Tensor logits = Tensor::empty({rows, vocab}, DType::f32, device);
  if (!packed.empty()) {
    const PackedWeight& weight = *packed[0];
    TFM_CHECK(weight.dtype() == hidden.dtype() && weight.device() == device &&
                  weight.out_features() == vocab,
              "{}: the output weight {} does not fit hidden {}", kOp, weight.describe(),
              hidden.describe());
    detail::kernel(kOp, device, &KernelTable::packed_linear)(
        hidden.device_raw(), rows, weight.form(), bias, logits.device_data<float>(),
        kernels::PostOp::none);
  } else {
    kernels::GemmArgs args;
    args.a = kernels::GemmOperand::dense(hidden.device_raw(), hidden.dtype(), {rows, d});
    args.b = kernels::GemmOperand::dense(embedding.device_raw(), embedding.dtype(), {vocab, d})
                 .transposed();
    args.c = kernels::GemmOperand::dense(logits.device_raw(), DType::f32, {rows, vocab});
    args.bias = bias;
    detail::kernel(kOp, device, &KernelTable::gemm)(args);
  }
  return top_k(log_softmax(logits), k, excluded);
}

}  // namespace

Tensor log_softmax(const Tensor& x) {
  detail::check_input(x, "log_softmax", "x");
  TFM_CHECK(x.rank() == 2 && x.dim(1) > 0, "log_softmax: x must be [rows, n > 0], got {}",
            x.describe());
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  detail::kernel("log_softmax", device, &KernelTable::log_softmax)(
      x.device_data<float>(), out.device_data<float>(), x.dim(0), x.dim(1));
  return out;
}

TopK top_k(const Tensor& x, int64_t k, int64_t excluded) {
  detail::check_input(x, "top_k", "x");
  TFM_CHECK(x.rank() == 2, "top_k: x must be [rows, n], got {}", x.describe());
  TFM_CHECK(k >= 1, "top_k: k = {} must be at least 1", k);
  const Device device = x.device();
  const KernelTable& backend = detail::kernels_for("top_k", device);
  TFM_CHECK(backend.max_top_k == 0 || k <= backend.max_top_k,
            "top_k: k = {} is more than the {} kernel's {}", k, backend.name, backend.max_top_k);
  TopK out = empty_top_k(x.dim(0), k, device);
  detail::entry("top_k", device, backend.top_k_rows)(
      x.device_data<float>(), x.dim(0), x.dim(1), k, excluded, out.values.device_data<float>(),
      out.indices.device_data<int32_t>(), out.counts.device_data<int32_t>());
  return out;
}

TopK output_log_softmax_top(const Tensor& hidden, const Tensor& embedding, int64_t k,
                            int64_t excluded,
                            const std::vector<std::shared_ptr<const PackedWeight>>& packed,
                            int64_t block, const Tensor& bias) {
  constexpr const char* kOp = "output_log_softmax_top";
  TFM_CHECK(hidden.defined() && embedding.defined(), "{}: an input is undefined", kOp);
  TFM_CHECK(hidden.dtype() == DType::f32 || hidden.dtype() == DType::bf16,
            "{}: hidden must be f32 or bf16, got {}", kOp, hidden.describe());
  TFM_CHECK(hidden.rank() == 2 && embedding.rank() == 2 && embedding.dim(1) == hidden.dim(1),
            "{}: hidden {} does not fit embedding {} (expected [rows, d] and [V, d])", kOp,
            hidden.describe(), embedding.describe());
  TFM_CHECK(packed.empty() ? embedding.dtype() == hidden.dtype() : block > 0,
            "{}: embedding {} cannot be multiplied with hidden {}", kOp, embedding.describe(),
            hidden.describe());
  TFM_CHECK(k >= 1, "{}: k = {} must be at least 1", kOp, k);
  TFM_CHECK(!bias.defined() ||
                (bias.dtype() == DType::f32 && bias.rank() == 1 && bias.dim(0) == embedding.dim(0)),
            "{}: bias {} must be f32 [{}]", kOp, bias.defined() ? bias.describe() : "",
            embedding.dim(0));
  const Device device = detail::op_device(kOp, hidden, embedding);
  TFM_CHECK(!bias.defined() || bias.device() == device, "{}: bias {} is not on {}", kOp,
            bias.describe(), device_name(device));
  const float* bias_data = bias.defined() ? bias.device_data<float>() : nullptr;
  const KernelTable& backend = detail::kernels_for(kOp, device);
  if (backend.log_softmax_top == nullptr)
    return output_top_unfused(hidden, embedding, k, excluded, packed, bias_data);
  TopK out = empty_top_k(hidden.dim(0), k, device);
  kernels::LogSoftmaxTopArgs args;
  args.hidden = hidden.device_raw();
  args.dtype = hidden.dtype();
  args.block = block;
  std::vector<const kernels::PackedForm*> blocks;
  if (packed.empty()) {
    args.embedding = embedding.device_raw();
  } else {
    for (const auto& p : packed) {
      // The form belongs to the backend that packed it.
      TFM_CHECK(p->device() == device, "a weight packed on {} has no {} form",
                device_name(p->device()), backend.name);
      blocks.push_back(&p->form());
    }
    args.packed_blocks = blocks.data();
  }
  args.rows = hidden.dim(0);
  args.d = hidden.dim(1);
  args.vocab = embedding.dim(0);
  args.m = k;
  args.excluded = excluded;
  args.bias = bias_data;
  backend.log_softmax_top(args, out.values.device_data<float>(), out.indices.device_data<int32_t>(),
                          out.counts.device_data<int32_t>());
  return out;
}

}  // namespace tfm::internal::ops
