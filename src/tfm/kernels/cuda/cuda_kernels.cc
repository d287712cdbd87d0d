// The CUDA backend's kernel table: the kernels of this folder, the runtime (runtime_cuda.h), and
// adapters where the shared signature (kernels/kernel_table.h) asks for more than one launch: the
// cross-entropy's sums copied back to the host, and the packed weights (the weight itself in the
// product type, which cuBLASLt reads as it is).
#include "tfm/kernels/cuda/cuda_kernels.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <utility>

#include "tfm/kernels/cuda/attention_cuda.h"
#include "tfm/kernels/cuda/cache_cuda.h"
#include "tfm/kernels/cuda/convert_cuda.h"
#include "tfm/kernels/cuda/cross_entropy_cuda.h"
#include "tfm/kernels/cuda/dropout_cuda.h"
#include "tfm/kernels/cuda/elementwise_cuda.h"
#include "tfm/kernels/cuda/embedding_cuda.h"
#include "tfm/kernels/cuda/fused_attention_cuda.h"
#include "tfm/kernels/cuda/layer_norm_cuda.h"
#include "tfm/kernels/cuda/matmul_cuda.h"
#include "tfm/kernels/cuda/optimizer_cuda.h"
#include "tfm/kernels/cuda/runtime_cuda.h"
#include "tfm/kernels/cuda/softmax_cuda.h"
#include "tfm/kernels/cuda/top_k_cuda.h"

namespace tfm::internal::cuda {

namespace {

using kernels::KernelTable;

// A GPU's packed weight: the plain row-major weight [out, in] in the product type, in device
// memory.
class DeviceWeight final : public kernels::PackedForm {
 public:
  explicit DeviceWeight(Tensor weight) : weight_(std::move(weight)) {}
  int64_t out_features() const override { return weight_.dim(0); }
  int64_t in_features() const override { return weight_.dim(1); }
  DType dtype() const override { return weight_.dtype(); }
  size_t bytes() const override { return weight_.nbytes(); }
  std::string describe() const override { return weight_.describe(); }
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

std::unique_ptr<const kernels::PackedForm> pack_weight(const Tensor& weight, DType product) {
  if (product != DType::bf16) return std::make_unique<const DeviceWeight>(weight.clone());
  Tensor converted = Tensor::empty(weight.shape(), DType::bf16, weight.device());
  f32_to_bf16(weight.device_data<float>(), converted.device_data<bf16>(), weight.numel());
  return std::make_unique<const DeviceWeight>(std::move(converted));
}

// y = x W^T with bias and ReLU as the product's epilogue, swish or GELU as a second pass; x in
// the weight's type.
void packed_linear(const void* x, int64_t rows, const kernels::PackedForm& form, const float* bias,
                   float* y, kernels::PostOp post) {
  const Tensor& weight = static_cast<const DeviceWeight&>(form).weight();
  const int64_t out = weight.dim(0), in = weight.dim(1);
  kernels::GemmArgs args;
  args.a = kernels::GemmOperand::dense(x, weight.dtype(), {rows, in});
  args.b = kernels::GemmOperand::dense(weight.device_raw(), weight.dtype(), {out, in}).transposed();
  args.c = kernels::GemmOperand::dense(y, DType::f32, {rows, out});
  args.bias = bias;
  args.relu = post == kernels::PostOp::relu;
  gemm(args);
  if (post == kernels::PostOp::swish) swish(y, y, rows * out);
  if (post == kernels::PostOp::gelu) gelu(y, y, rows * out);
}

// The sums of cuda::cross_entropy, on the host: the one copy of the op, which waits for the
// stream (the API returns tokens and nll_sum as host numbers). The kernels skip targets outside the
// vocabulary and count them; tokens < 0 says there was one.
kernels::CrossEntropySums cross_entropy_sums(const float* logits, const int32_t* targets,
                                             int64_t rows, int64_t vocab, float label_smoothing,
                                             int32_t ignore_index, float* lse) {
  Tensor row_loss_nll = Tensor::empty({rows, 2}, DType::f32, Device::cuda);
  // kSumCount doubles, in an f32 tensor of twice as many elements (tfm has no f64).
  Tensor device_sums = Tensor::empty({2 * kSumCount}, DType::f32, Device::cuda);
  cross_entropy(logits, targets, rows, vocab, label_smoothing, ignore_index, lse,
                row_loss_nll.device_data<float>(), static_cast<double*>(device_sums.device_raw()));
  double host[kSumCount];
  const Tensor host_sums = device_sums.to(Device::cpu);
  std::memcpy(host, host_sums.raw(), sizeof(host));
  kernels::CrossEntropySums sums;
  sums.loss = host[kLossSum];
  sums.nll = host[kNllSum];
  sums.tokens = host[kBadTargets] > 0 ? -1 : static_cast<int64_t>(host[kTokens]);
  return sums;
}

void fill_runtime(KernelTable& t) {
  t.name = "CUDA";
  t.unavailable_reason = unavailable_reason;
  t.initialize = initialize;
  t.initialized = initialized;
  t.synchronize = synchronize;
  t.describe = describe;
  t.multiplies_bf16_natively = has_bf16_tensor_cores;
  t.memory_info = memory_info;
  t.queue = queue;
  t.max_head_dim = kMaxHeadDim;
  t.max_top_k = kMaxTopK;
  t.max_embedding_ids = std::numeric_limits<int32_t>::max();
}

void fill_rows_and_elements(KernelTable& t) {
  t.add = add;
  t.write_grad = write_grad;
  t.relu = relu;
  t.relu_backward = relu_backward;
  t.relu_backward_bf16 = relu_backward_bf16;
  t.gelu = gelu;
  t.gelu_backward = gelu_backward;
  t.swish = swish;
  t.swish_backward = swish_backward;
  t.sum_rows_workspace = sum_rows_workspace;
  t.sum_rows = sum_rows;
  t.f32_to_bf16 = f32_to_bf16;
  t.dropout = dropout;
  t.dropout_backward = dropout_backward;
  t.softmax = softmax;
  t.softmax_backward = softmax_backward;
  t.log_softmax = log_softmax;
  t.top_k_rows = top_k_rows;
  t.layer_norm = layer_norm;
  t.layer_norm_backward_workspace = layer_norm_backward_workspace;
  t.layer_norm_backward = layer_norm_backward;
  t.add_dropout_layer_norm = add_dropout_layer_norm;
  t.add_dropout_layer_norm_backward = add_dropout_layer_norm_backward;
  t.adam_step = adam_step;
  t.sum_squares = sum_squares;
  t.sum_squares_async = sum_squares_async;
  t.scale = scale;
  t.fill = fill;
  t.moving_average = moving_average;
}

void fill_embeddings_and_attention(KernelTable& t) {
  t.embedding = embedding;
  t.embedding_backward_workspace = embedding_backward_workspace;
  t.embedding_backward = embedding_backward;
  t.add_positions = add_positions;
  t.add_positions_backward_table = add_positions_backward_table;
  t.attention_forward = attention_forward;
  t.attention_backward = attention_backward;
  t.fused_attention_supports = fused_attention_supports;
  t.fused_attention_forward = fused_attention_forward;
  t.fused_attention_backward_workspace = fused_attention_backward_workspace;
  t.fused_attention_backward = fused_attention_backward;
  t.attention_forward_cached = attention_forward_cached;
  t.cache_write = cache_write;
  t.cache_gather = cache_gather;
}

void fill_losses_and_products(KernelTable& t) {
  t.cross_entropy = cross_entropy_sums;
  t.cross_entropy_rows = cross_entropy_rows;
  t.cross_entropy_rows_with_grad = cross_entropy_rows_with_grad;
  // The upstream gradient stays on the device: the kernel scales by g / norm there.
  t.cross_entropy_backward = [](const float* logits, const int32_t* targets, const float* lse,
                                int64_t rows, int64_t vocab, float label_smoothing,
                                int32_t ignore_index, double norm, const float* g, float* dlogits,
                                bool accumulate) {
    cross_entropy_backward(logits, targets, lse, rows, vocab, label_smoothing, ignore_index,
                           static_cast<float>(1.0 / norm), dlogits, accumulate, g);
  };
  t.gemm = [](const kernels::GemmArgs& args) { gemm(args); };
  t.pack_weight = pack_weight;
  t.packed_linear = packed_linear;
}

}  // namespace

const kernels::KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t;
    fill_runtime(t);
    fill_rows_and_elements(t);
    fill_embeddings_and_attention(t);
    fill_losses_and_products(t);
    return t;
  }();
  return table;
}

}  // namespace tfm::internal::cuda
