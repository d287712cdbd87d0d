// The decoding ops: log-softmax, top-k and the fused output layer of a search step. Inference only:
// none records a backward.
#include "tfm/kernels/cpu/log_softmax_top_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/softmax_cpu.h"
#include "tfm/kernels/cpu/top_k_cpu.h"
#include "tfm/ops/argument_checks.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cuda/matmul_cuda.h"
#include "tfm/kernels/cuda/softmax_cuda.h"
#include "tfm/kernels/cuda/top_k_cuda.h"
#endif

namespace tfm::ops {

namespace {
TopK empty_top_k(int64_t rows, int64_t k, Device device) {
  return {Tensor::empty({rows, k}, DType::f32, device),
          Tensor::empty({rows, k}, DType::i32, device), Tensor::empty({rows}, DType::i32, device)};
}
}  // namespace

Tensor log_softmax(const Tensor& x) {
  detail::check_input(x, "log_softmax", "x");
  TFM_CHECK(x.rank() == 2 && x.dim(1) > 0, "log_softmax: x must be [rows, n > 0], got {}",
            x.describe());
  const Device device = x.device();
  Tensor out = Tensor::empty(x.shape(), DType::f32, device);
  TFM_DISPATCH_CUDA(
      "log_softmax", device,
      cpu::log_softmax(x.data<float>(), out.data<float>(), x.dim(0), x.dim(1)),
      cuda::log_softmax(x.device_data<float>(), out.device_data<float>(), x.dim(0), x.dim(1)));
  return out;
}

TopK top_k(const Tensor& x, int64_t k, int64_t excluded) {
  detail::check_input(x, "top_k", "x");
  TFM_CHECK(x.rank() == 2, "top_k: x must be [rows, n], got {}", x.describe());
  TFM_CHECK(k >= 1, "top_k: k = {} must be at least 1", k);
  const Device device = x.device();
#ifdef TFM_HAVE_CUDA
  TFM_CHECK(device == Device::cpu || k <= cuda::kMaxTopK,
            "top_k: k = {} is more than the CUDA kernel's {}", k, cuda::kMaxTopK);
#endif
  TopK out = empty_top_k(x.dim(0), k, device);
  TFM_DISPATCH_CUDA(
      "top_k", device,
      cpu::top_k_rows(x.data<float>(), x.dim(0), x.dim(1), k, excluded, out.values.data<float>(),
                      out.indices.data<int32_t>(), out.counts.data<int32_t>()),
      cuda::top_k_rows(x.device_data<float>(), x.dim(0), x.dim(1), k, excluded,
                       out.values.device_data<float>(), out.indices.device_data<int32_t>(),
                       out.counts.device_data<int32_t>()));
  return out;
}

TopK output_log_softmax_top(const Tensor& hidden, const Tensor& embedding, int64_t k,
                            int64_t excluded,
                            const std::vector<std::shared_ptr<const PackedWeight>>& packed,
                            int64_t block) {
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
  const Device device = detail::op_device(kOp, hidden, embedding);
  if (device != Device::cpu) {
    // A GPU: the [rows, V] logits in one product (decoding has few rows: 128 x 37000 f32 is 19
    // MB), their log-softmax, then its top k. The packed form is the embedding in hidden's type.
    TFM_CHECK(packed.size() <= 1, "{}: a GPU multiplies the whole embedding as one block", kOp);
    const Tensor& weight = packed.empty() ? embedding : packed[0]->device_weight();
    TFM_CHECK(weight.dtype() == hidden.dtype() && weight.device() == device &&
                  weight.dim(0) == embedding.dim(0),
              "{}: the output weight {} does not fit hidden {}", kOp, weight.describe(),
              hidden.describe());
    const int64_t rows = hidden.dim(0), vocab = embedding.dim(0), d = hidden.dim(1);
    Tensor logits = Tensor::empty({rows, vocab}, DType::f32, device);
    cpu::GemmArgs args;
    args.a = cpu::GemmOperand::dense(hidden.device_raw(), hidden.dtype(), {rows, d});
    args.b = cpu::GemmOperand::dense(weight.device_raw(), weight.dtype(), {vocab, d}).transposed();
    args.c = cpu::GemmOperand::dense(logits.device_raw(), DType::f32, {rows, vocab});
    TFM_DISPATCH_CUDA(kOp, device, cpu::gemm(args), cuda::gemm(args));
    return top_k(log_softmax(logits), k, excluded);
  }
  TopK out = empty_top_k(hidden.dim(0), k, device);
  cpu::LogSoftmaxTopArgs args;
  args.hidden = hidden.raw();
  args.dtype = hidden.dtype();
  args.block = block;
  std::vector<const cpu::PackedWeight*> blocks;
  if (packed.empty()) {
    args.embedding = embedding.raw();
  } else {
    for (const auto& p : packed) blocks.push_back(&p->cpu());
    args.packed_blocks = blocks.data();
  }
  args.rows = hidden.dim(0);
  args.d = hidden.dim(1);
  args.vocab = embedding.dim(0);
  args.m = k;
  args.excluded = excluded;
  cpu::log_softmax_top(args, out.values.data<float>(), out.indices.data<int32_t>(),
                       out.counts.data<int32_t>());
  return out;
}

}  // namespace tfm::ops
