// A backend's kernels as one table of function pointers, and the registry of one table per device
// (docs/ARCHITECTURE.md, "Op dispatch"). Every kernel is declared once, here: its arguments are
// device addresses (Tensor::device_data) and the structs of kernel_args.h, the same for every
// backend. A backend fills the entries it has (kernels/cpu/cpu_kernels.cc,
// kernels/cuda/cuda_kernels.cc); a null entry is a kernel the backend does not have, which the op
// reports in one line naming itself and the device (ops/dispatch.h).
//
// Where two backends' kernels differ in what they need besides the data, the table says so in
// data, not in the op: a `*_workspace` entry gives the scratch a kernel wants the op to allocate
// (null: none), `host_memory` says that the op may read the tensors' elements on the host, and
// the limits are the largest arguments the kernels take (0: none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tfm/core/device.h"
#include "tfm/core/dtype.h"
#include "tfm/core/tensor.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::kernels {

struct KernelTable {
  // ---- the backend ----
  const char* name = "";     // in messages: "CPU", "CUDA"
  bool host_memory = false;  // its memory is the host's: ops check ids and targets in place
  // The device's runtime; null entries: nothing to do (the CPU). unavailable_reason: empty when
  // usable; initialize: make ready (idempotent, one-line error when it cannot); synchronize: wait
  // for every queued kernel; memory_info: free and total bytes.
  std::string (*unavailable_reason)() = nullptr;
  void (*initialize)() = nullptr;
  bool (*initialized)() = nullptr;
  void (*synchronize)() = nullptr;
  std::string (*describe)() = nullptr;
  void (*memory_info)(size_t* free_bytes, size_t* total_bytes) = nullptr;
  // The stream this device's kernels are queued on (a cudaStream_t on CUDA), for a collective that
  // must be ordered with them (dist/nccl_communicator.h); null: the device queues nothing (the
  // CPU).
  void* (*queue)() = nullptr;
  // Whether the device multiplies bf16 faster than f32 (`precision: auto`); null: the CPU's rule
  // (ops::native_bf16_products).
  bool (*multiplies_bf16_natively)() = nullptr;
  // Limits of the kernels (0: none).
  int64_t max_head_dim = 0;       // attention_forward_cached's dk and dv
  int64_t max_top_k = 0;          // top_k_rows' k
  int64_t max_embedding_ids = 0;  // embedding's n
  // Whether attention_forward_cached needs its probs buffer (else it may be null).
  bool cached_attention_needs_probs = false;

  // ---- element by element ----
  void (*add)(const float* a, const float* b, float* out, int64_t n) = nullptr;
  // dst = scale * src, or dst += scale * src when accumulate.
  void (*write_grad)(float* dst, const float* src, int64_t n, bool accumulate,
                     float scale) = nullptr;
  void (*relu)(const float* x, float* y, int64_t n) = nullptr;
  void (*relu_backward)(const float* y, const float* g, float* dx, int64_t n,
                        bool accumulate) = nullptr;
  // relu_backward without accumulation that also writes dx rounded to bf16 (as f32_to_bf16) in
  // the same pass: linear_relu's backward under bf16 products.
  void (*relu_backward_bf16)(const float* y, const float* g, float* dx, bf16* dx_bf16,
                             int64_t n) = nullptr;
  // relu_backward_bf16 with the bias's gradient in the same pass, for y, g and dx_bf16 [rows,
  // cols]: dx_bf16 = (g where y > 0) rounded to bf16; db [cols] (+)= its column sums in f32 (db
  // null: no bias gradient); no f32 dx. Null: the backend has none, and linear_relu runs
  // relu_backward_bf16 and sum_rows instead.
  void (*relu_backward_bias_bf16)(const float* y, const float* g, int64_t rows, int64_t cols,
                                  bf16* dx_bf16, float* db, bool accumulate) = nullptr;
  // The other FFN activations: gelu y = x Phi(x) (the erf form), swish y = x sigmoid(x); their
  // backwards take the input x: dx (+)= g * dy/dx.
  void (*gelu)(const float* x, float* y, int64_t n) = nullptr;
  void (*gelu_backward)(const float* x, const float* g, float* dx, int64_t n,
                        bool accumulate) = nullptr;
  void (*swish)(const float* x, float* y, int64_t n) = nullptr;
  void (*swish_backward)(const float* x, const float* g, float* dx, int64_t n,
                         bool accumulate) = nullptr;
  // dst [cols] (+)= the column sums of src [rows, cols].
  int64_t (*sum_rows_workspace)(int64_t rows, int64_t cols) = nullptr;  // floats
  void (*sum_rows)(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate,
                   float* workspace) = nullptr;
  void (*f32_to_bf16)(const float* src, bf16* dst, int64_t n) = nullptr;
  void (*dropout)(const float* x, float* y, int64_t n, float p, uint64_t seed) = nullptr;
  void (*dropout_backward)(const float* g, float* dx, int64_t n, float p, uint64_t seed,
                           bool accumulate) = nullptr;

  // ---- rows: softmax, layer norm, top k ----
  void (*softmax)(const float* x, float* y, int64_t rows, int64_t n) = nullptr;
  void (*softmax_backward)(const float* y, const float* g, float* dx, int64_t rows, int64_t n,
                           bool accumulate) = nullptr;
  void (*log_softmax)(const float* x, float* y, int64_t rows, int64_t n) = nullptr;
  void (*top_k_rows)(const float* x, int64_t rows, int64_t n, int64_t k, int64_t excluded,
                     float* values, int32_t* indices, int32_t* counts) = nullptr;
  void (*layer_norm)(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                     float* rstd, int64_t rows, int64_t d, float eps) = nullptr;
  int64_t (*layer_norm_backward_workspace)(int64_t rows, int64_t d) = nullptr;  // floats
  void (*layer_norm_backward)(const float* x, const float* gamma, const float* mean,
                              const float* rstd, const float* g, int64_t rows, int64_t d,
                              const LayerNormGrads& grads, float* workspace) = nullptr;
  // s = x + dropout(branch) into sum, y = LayerNorm(s). sum may be y itself: each row of s is then
  // normalised in place (ops::add_dropout_layer_norm does so without a backward).
  void (*add_dropout_layer_norm)(const float* x, const float* branch, float p, uint64_t seed,
                                 const float* gamma, const float* beta, float* sum, float* y,
                                 float* mean, float* rstd, int64_t rows, int64_t d,
                                 float eps) = nullptr;
  void (*add_dropout_layer_norm_backward)(const float* sum, const float* gamma, const float* mean,
                                          const float* rstd, const float* g, int64_t rows,
                                          int64_t d, float p, uint64_t seed,
                                          const LayerNormGrads& grads, float* dbranch,
                                          bool dbranch_accumulate, float* workspace) = nullptr;

  // ---- embeddings ----
  void (*embedding)(const int32_t* ids, int64_t n, const float* table, int64_t vocab, int64_t d,
                    float scale, float* out) = nullptr;
  int64_t (*embedding_backward_workspace)(int64_t n, int64_t vocab) = nullptr;  // int32s
  void (*embedding_backward)(const int32_t* ids, int64_t n, const float* g, int64_t vocab,
                             int64_t d, float scale, float* dtable, bool accumulate,
                             int32_t* workspace) = nullptr;
  void (*add_positions)(const float* x, const float* table, int64_t batch, int64_t steps, int64_t d,
                        int64_t offset, float* out) = nullptr;
  void (*add_positions_backward_table)(const float* g, int64_t batch, int64_t steps, int64_t d,
                                       int64_t offset, int64_t table_rows, float* dtable,
                                       bool accumulate) = nullptr;

  // ---- attention and its key/value cache ----
  void (*attention_forward)(const AttentionDims& dims, const AttentionMaskSpec& mask,
                            const AttentionDropout& dropout, const float* q, const float* k,
                            const float* v, float* probs, float* dropped, float* out) = nullptr;
  void (*attention_backward)(const AttentionDims& dims, const AttentionMaskSpec& mask,
                             const AttentionDropout& dropout, const float* q, const float* k,
                             const float* v, const float* probs, const float* d_out, float* d_probs,
                             const AttentionGrads& grads) = nullptr;
  // Fused attention for bf16 training (null entries: the backend has none; ops::attention then
  // runs the entries above): bf16 products with f32 accumulation that never store P. The forward
  // leaves lse [B, h, Tq] (one f32 a query row) for the backward; `out` is the forward's output.
  // supports: whether the kernels take these dims (head widths).
  bool (*fused_attention_supports)(const AttentionDims& dims) = nullptr;
  void (*fused_attention_forward)(const AttentionDims& dims, const AttentionMaskSpec& mask,
                                  const AttentionDropout& dropout, const float* q, const float* k,
                                  const float* v, float* lse, float* out) = nullptr;
  int64_t (*fused_attention_backward_workspace)(const AttentionDims& dims) = nullptr;  // floats
  void (*fused_attention_backward)(const AttentionDims& dims, const AttentionMaskSpec& mask,
                                   const AttentionDropout& dropout, const float* q, const float* k,
                                   const float* v, const float* out, const float* lse,
                                   const float* d_out, float* workspace,
                                   const AttentionGrads& grads) = nullptr;
  // kv_rows: the rows of the cache buffers (a device kernel's bound for the slots).
  void (*attention_forward_cached)(const AttentionDims& dims, const AttentionMaskSpec& mask,
                                   const float* q, const CachedKeyValues& kv, int64_t kv_rows,
                                   float* probs, float* out) = nullptr;
  void (*cache_write)(char* dst, int64_t dst_capacity, const char* src, int64_t rows, int64_t n,
                      int64_t width, int64_t position) = nullptr;
  void (*cache_gather)(char* dst, int64_t dst_capacity, const char* src, int64_t src_capacity,
                       const int32_t* slots, int64_t slots_stride, const int64_t* rows,
                       int64_t n_rows, int64_t positions, int64_t width) = nullptr;

  // ---- losses ----
  // The sums on the host; lse receives each counted row's log-sum-exp. tokens < 0: a target was
  // outside the vocabulary (a backend that does not check the targets on the host).
  CrossEntropySums (*cross_entropy)(const float* logits, const int32_t* targets, int64_t rows,
                                    int64_t vocab, float label_smoothing, int32_t ignore_index,
                                    float* lse) = nullptr;
  // row_loss_nll [rows, 2]: each row's loss and nll; lse (may be null): its log-sum-exp.
  void (*cross_entropy_rows)(const float* logits, const int32_t* targets, int64_t rows,
                             int64_t vocab, float label_smoothing, int32_t ignore_index,
                             float* row_loss_nll, float* lse) = nullptr;
  // cross_entropy_rows, the logits overwritten with their gradient, or, when dlogits_bf16 is
  // given, the gradient's bf16 copy written there (the logits then hold the gradient on the CPU,
  // are left as they are on a GPU: nothing reads them after).
  void (*cross_entropy_rows_with_grad)(float* logits, const int32_t* targets, int64_t rows,
                                       int64_t vocab, float label_smoothing, int32_t ignore_index,
                                       float scale, float* row_loss_nll,
                                       bf16* dlogits_bf16) = nullptr;
  // R-Drop's loss of two passes' logits with the same targets, and its gradient in place of the
  // logits (cpu::paired_cross_entropy_rows_with_grad). The CPU's only so far.
  void (*paired_cross_entropy_rows_with_grad)(float* logits_a, float* logits_b,
                                              const int32_t* targets, int64_t rows, int64_t vocab,
                                              float label_smoothing, int32_t ignore_index,
                                              float scale, float weight, float* stats_a,
                                              float* stats_b, float* consistency,
                                              bf16* dlogits_a_bf16, bf16* dlogits_b_bf16) = nullptr;
  // dlogits (+)= g[0] / norm * (softmax(z) - q); g is the loss's gradient (one element).
  void (*cross_entropy_backward)(const float* logits, const int32_t* targets, const float* lse,
                                 int64_t rows, int64_t vocab, float label_smoothing,
                                 int32_t ignore_index, double norm, const float* g, float* dlogits,
                                 bool accumulate) = nullptr;

  // ---- products ----
  void (*gemm)(const GemmArgs& args) = nullptr;
  // ReLU's backward through the product that makes its incoming gradient, under bf16 products
  // (ops::relu_feed_forward): c = (a @ b where relu_mask > 0, else 0) rounded to bf16 as
  // f32_to_bf16, and db (+)= the column sums of those masked f32 values (db null: none), each
  // column's rows added in order; a, b and c bf16, c one dense matrix as relu_mask, no bias,
  // accumulation or ReLU in args. Null: the backend has none, and relu_feed_forward runs
  // linear_relu and linear.
  void (*relu_backward_product_bf16)(const GemmArgs& args, const bf16* relu_mask, float* db,
                                     bool accumulate_db) = nullptr;
  // weight: f32 [out, in] on the backend's device; product: the product type.
  std::unique_ptr<const PackedForm> (*pack_weight)(const Tensor& weight, DType product) = nullptr;
  // y [rows, out] (f32) = x W^T (+ bias), then `post` (relu or swish); x [rows, in] in the weight's
  // product type (f32 for an i8 weight).
  void (*packed_linear)(const void* x, int64_t rows, const PackedForm& weight, const float* bias,
                        float* y, PostOp post) = nullptr;
  // packed_linear for 1 to 4 weights of the same in_features on the same x, without ReLU: y[j] =
  // x weights[j]^T (+ biases[j]), the same bits as packed_linear a weight. Null: the op runs
  // packed_linear a weight.
  void (*packed_linears)(const void* x, int64_t rows, const PackedForm* const* weights,
                         const float* const* biases, float* const* y, int count) = nullptr;
  // The output layer of a decoding step in one pass (null: the op multiplies, then log_softmax
  // and top_k_rows). values/tokens [rows, m], counts [rows].
  void (*log_softmax_top)(const LogSoftmaxTopArgs& args, float* values, int32_t* tokens,
                          int32_t* counts) = nullptr;

  // ---- optimizers ----
  void (*adam_step)(float* p, float* m, float* v, const float* g, int64_t n,
                    const AdamStep& step) = nullptr;
  double (*sum_squares)(const float* x, int64_t n) = nullptr;
  // *device_out (+)= sum of squares, a double in device memory, without waiting (null entry: the
  // op calls sum_squares).
  void (*sum_squares_async)(const float* x, int64_t n, double* device_out,
                            bool accumulate) = nullptr;
  void (*scale)(float* x, int64_t n, float scale) = nullptr;
  void (*fill)(float* x, int64_t n, float value) = nullptr;
  // average = decay * average + (1 - decay) * x: the weights' moving average (train/session.h).
  void (*moving_average)(float* average, const float* x, int64_t n, float decay) = nullptr;
};

// Makes `table` the kernels of `device` (it must outlive the process's ops). Builtin backends
// register in registry.cc.
void register_kernels(Device device, const KernelTable* table);

// The kernels of `device`; null when no backend for it is built in.
const KernelTable* registered_kernels(Device device);

// The backend's name for messages ("CPU", "CUDA"), whether or not it is built in, and the reason
// a build without it gives.
std::string_view backend_name(Device device);
std::string_view not_built_reason(Device device);

}  // namespace tfm::internal::kernels
