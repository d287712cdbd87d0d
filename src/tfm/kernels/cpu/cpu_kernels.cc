// The CPU backend's kernel table: the kernels of this folder, and small adapters where the shared
// signature (kernels/kernel_table.h) carries an argument the CPU kernel does not need (a device
// kernel's workspace or bound).
#include "tfm/kernels/cpu/cpu_kernels.h"

#include "tfm/kernels/cpu/attention_cpu.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/cache_cpu.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/cross_entropy_cpu.h"
#include "tfm/kernels/cpu/dropout_cpu.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/embedding_cpu.h"
#include "tfm/kernels/cpu/layer_norm_cpu.h"
#include "tfm/kernels/cpu/log_softmax_top_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/optimizer_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/softmax_cpu.h"
#include "tfm/kernels/cpu/thread_shares.h"
#include "tfm/kernels/cpu/top_k_cpu.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

using kernels::KernelTable;

void fill_rows_and_elements(KernelTable& t) {
  t.add = add;
  t.write_grad = write_grad;
  t.relu = relu;
  t.relu_backward = relu_backward;
  t.relu_backward_bf16 = relu_backward_bf16;
  t.relu_backward_bias_bf16 = relu_backward_bias_bf16;
  t.relu_backward_product_bf16 = relu_backward_product_bf16;
  t.gelu = gelu;
  t.gelu_backward = gelu_backward;
  t.swish = swish;
  t.swish_backward = swish_backward;
  t.sum_rows = [](const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate,
                  float*) { sum_rows(src, rows, cols, dst, accumulate); };
  t.f32_to_bf16 = f32_to_bf16;
  t.dropout = dropout;
  t.dropout_backward = dropout_backward;
  t.softmax = softmax;
  t.softmax_backward = softmax_backward;
  t.log_softmax = log_softmax;
  t.top_k_rows = top_k_rows;
  t.layer_norm = layer_norm;
  t.layer_norm_backward = [](const float* x, const float* gamma, const float* mean,
                             const float* rstd, const float* g, int64_t rows, int64_t d,
                             const LayerNormGrads& grads, float*) {
    layer_norm_backward(x, gamma, mean, rstd, g, rows, d, grads);
  };
  t.add_dropout_layer_norm = add_dropout_layer_norm;
  t.add_dropout_layer_norm_backward = [](const float* sum, const float* gamma, const float* mean,
                                         const float* rstd, const float* g, int64_t rows, int64_t d,
                                         float p, uint64_t seed, const LayerNormGrads& grads,
                                         float* dbranch, bool dbranch_accumulate, float*) {
    add_dropout_layer_norm_backward(sum, gamma, mean, rstd, g, rows, d, p, seed, grads, dbranch,
                                    dbranch_accumulate);
  };
  t.adam_step = adam_step;
  t.sum_squares = sum_squares;
  t.scale = scale;
  t.fill = fill;
  t.moving_average = moving_average;
}

void fill_embeddings_and_attention(KernelTable& t) {
  t.embedding = [](const int32_t* ids, int64_t n, const float* table, int64_t, int64_t d,
                   float scale, float* out) { embedding(ids, n, table, d, scale, out); };
  t.embedding_backward = [](const int32_t* ids, int64_t n, const float* g, int64_t vocab, int64_t d,
                            float scale, float* dtable, bool accumulate, int32_t*) {
    embedding_backward(ids, n, g, vocab, d, scale, dtable, accumulate);
  };
  t.add_positions = add_positions;
  t.add_positions_backward_table = add_positions_backward_table;
  t.attention_forward = attention_forward;
  // No scratch: the backward recomputes each dropped weight where it uses it.
  t.attention_backward = attention_backward;
  t.attention_forward_cached = [](const AttentionDims& dims, const AttentionMaskSpec& mask,
                                  const float* q, const CachedKeyValues& kv, int64_t, float* probs,
                                  float* out) {
    attention_forward_cached(dims, mask, q, kv, probs, out);
  };
  t.cache_write = cache_write;
  t.cache_gather = cache_gather;
}

void fill_losses_and_products(KernelTable& t) {
  t.cross_entropy = cross_entropy;
  t.cross_entropy_rows = cross_entropy_rows;
  t.cross_entropy_rows_with_grad = cross_entropy_rows_with_grad;
  t.paired_cross_entropy_rows_with_grad = paired_cross_entropy_rows_with_grad;
  // The upstream gradient is a host number here: the scale g / norm is taken on the host.
  t.cross_entropy_backward = [](const float* logits, const int32_t* targets, const float* lse,
                                int64_t rows, int64_t vocab, float label_smoothing,
                                int32_t ignore_index, double norm, const float* g, float* dlogits,
                                bool accumulate) {
    const float scale = static_cast<float>(g[0] / norm);
    cross_entropy_backward(logits, targets, lse, rows, vocab, label_smoothing, ignore_index, scale,
                           dlogits, accumulate);
  };
  t.gemm = gemm;
  t.pack_weight = [](const Tensor& weight,
                     DType product) -> std::unique_ptr<const kernels::PackedForm> {
    return std::make_unique<const PackedWeight>(weight.data<float>(), weight.dim(0), weight.dim(1),
                                                product);
  };
  t.packed_linear = [](const void* x, int64_t rows, const kernels::PackedForm& weight,
                       const float* bias, float* y, kernels::PostOp post) {
    packed_linear(x, rows, static_cast<const PackedWeight&>(weight), bias, y, post);
  };
  t.packed_linears = [](const void* x, int64_t rows, const kernels::PackedForm* const* weights,
                        const float* const* biases, float* const* y, int count) {
    const PackedWeight* packed[4] = {};
    for (int j = 0; j < count && j < 4; ++j)
      packed[j] = static_cast<const PackedWeight*>(weights[j]);
    packed_linears(x, rows, packed, biases, y, count);
  };
  t.log_softmax_top = [](const LogSoftmaxTopArgs& args, float* values, int32_t* tokens,
                         int32_t* counts) { log_softmax_top(args, values, tokens, counts); };
}

}  // namespace

const kernels::KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t;
    t.name = "CPU";
    t.host_memory = true;
    // The cached attention uses its probs buffer as the softmax's scratch.
    t.cached_attention_needs_probs = true;
    fill_rows_and_elements(t);
    fill_embeddings_and_attention(t);
    fill_losses_and_products(t);
    return t;
  }();
  return table;
}

const char* product_split() {
  if (!blocked_gemm_available()) return "";
  return product_thread_shares().measured() ? "measured" : "even";
}

const IsaKernels& isa_kernels() {
  static const IsaKernels kernels{
      &kernel_table,    &vdpbf16ps_to_fma_rate, &onednn_multiplies_bf16, &bf16_products_widened,
      &onednn_uses_amx, &product_split,         &describe_int8_products};
  return kernels;
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
