// The argument structs of the kernels that every backend shares (kernel_table.h): shapes, masks,
// gradient targets and product operands, in plain data with device addresses. One definition for
// all backends, so that an op fills them once whatever device its tensors are on.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "tfm/core/dtype.h"

namespace tfm::internal::kernels {

// ---- attention ----

struct AttentionDims {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, dk = 0, dv = 0;
  int64_t prob_count() const { return batch * heads * tq * tk; }
};

// Both masks hide a suffix of each row: query t of batch b sees keys [0, visible_keys(b, t)).
struct AttentionMaskSpec {
  const int32_t* key_lengths = nullptr;  // [batch], or nullptr: every key is real
  bool causal = false;
  int64_t query_offset = 0;

  int64_t visible_keys(int64_t b, int64_t t, int64_t tk) const {
    int64_t n = key_lengths ? key_lengths[b] : tk;
    if (causal) n = std::min(n, t + query_offset + 1);
    return n;
  }
};

// Dropout on the attention weights; element (b, head, t, j) of P has index ((b*h + head)*Tq + t)*Tk
// + j.
struct AttentionDropout {
  float p = 0.0f;
  uint64_t seed = 0;
};

// Where an incremental decoder keeps the keys and values of batch b (kernel of
// ops::attention_cached): position j of batch b is in row r = slots ? slots[b * slots_stride + j] :
// b of [rows, capacity, h*d] buffers, i.e. its key starts at k + r * k_batch_stride + j * h*dk
// (values likewise). The slot table lets beam search reorder its hypotheses by rewriting indices
// instead of copying the caches.
struct CachedKeyValues {
  DType dtype =
      DType::f32;  // of k and v: f32 or bf16 (read as f32; the products accumulate in f32)
  const void* k = nullptr;
  int64_t k_batch_stride = 0;
  const void* v = nullptr;
  int64_t v_batch_stride = 0;
  const int32_t* slots = nullptr;
  int64_t slots_stride = 0;
};

// Where the backward writes each gradient (nullptr: not needed), and whether it adds to what the
// buffer holds. The kernel writes dv, then dq, then dk: targets must be taken in that order so
// that one tensor passed as several inputs accumulates correctly.
struct AttentionGrads {
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  bool accumulate_q = false, accumulate_k = false, accumulate_v = false;
};

// ---- layer norm ----

struct LayerNormGrads {
  float* dx = nullptr;  // null: not wanted
  bool dx_accumulate = false;
  // The gradient that reaches the norm's input past the norm (a pre-norm residual stream's, [rows,
  // d]), added to the input gradient that comes through it; null: none.
  const float* residual = nullptr;
  float* dgamma = nullptr;
  bool dgamma_accumulate = false;
  float* dbeta = nullptr;
  bool dbeta_accumulate = false;
};

// ---- matrix products ----

// Rank of a product's operands: [rows, cols], [batch, rows, cols] or [b0, b1, rows, cols].
inline constexpr int kMaxGemmRank = 4;

// A (batch of) matrices viewed through dims and element strides. The element type is a field so
// that bf16 operands with an f32 result need no change of interface.
struct GemmOperand {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<int64_t, kMaxGemmRank> dims{};
  std::array<int64_t, kMaxGemmRank> strides{};

  // A view with the given dims and strides (same count, 2 to kMaxGemmRank).
  static GemmOperand strided(const void* data, DType dtype, std::initializer_list<int64_t> dims,
                             std::initializer_list<int64_t> strides);
  // A row-major [..., rows, cols] block.
  static GemmOperand dense(const void* data, DType dtype, std::initializer_list<int64_t> dims);
  // The same elements seen as the transpose of each matrix: swaps the last two dims and strides.
  GemmOperand transposed() const;

  int64_t rows() const { return dims[rank - 2]; }
  int64_t cols() const { return dims[rank - 1]; }
};

// What a packed product applies to its outputs in its own stores: nothing, max(0, y), swish
// y sigmoid(y) or GELU y Phi(y) (the same bits as the swish or gelu kernel after the product).
enum class PostOp : uint8_t { none, relu, swish, gelu };

// c = alpha * (a @ b + bias), or c += alpha * (a @ b + bias) when `accumulate` (the bias before
// the output scale, the sum last but for the ReLU); with `relu`, c = max(c, 0) last.
//   a: [batch..., M, K], b: [batch..., K, N], c: [batch..., M, N], all of one rank; a batch dim of
//   a or b may be 1 where c's is larger (broadcast). bias: f32 [N] or nullptr.
// f32 operands give an f32 result; a and b in bf16 may give f32 or bf16.
struct GemmArgs {
  GemmOperand a;
  GemmOperand b;
  GemmOperand c;
  const float* bias = nullptr;
  float alpha = 1.0f;
  bool accumulate = false;
  bool relu = false;
};

// A weight packed once for inference products (y = x W^T, W [out, in]) in the layout its
// backend's product reads fastest. What is inside belongs to the backend that packed it
// (KernelTable::pack_weight); everyone else sees only this.
class PackedForm {
 public:
  virtual ~PackedForm() = default;
  virtual int64_t out_features() const = 0;
  virtual int64_t in_features() const = 0;
  virtual DType dtype() const = 0;  // the product type it was packed in
  virtual size_t bytes() const = 0;
  // For messages: "bf16[out, in]" and how it is stored.
  virtual std::string describe() const = 0;
};

// ---- decoding ----

// The output layer of a decoding step without its logits (KernelTable::log_softmax_top).
struct LogSoftmaxTopArgs {
  const void* hidden = nullptr;  // [rows, d]
  // Of hidden and the embedding: f32, or bf16 (f32 accumulation); an i8 packed embedding takes
  // f32 hidden, quantised once per row.
  DType dtype = DType::f32;
  int64_t rows = 0, d = 0, vocab = 0;
  // The embedding [vocab, d] (logits = hidden embedding^T), in column blocks of `block` tokens
  // (the last one shorter): either plain, or as one packed weight per block (packed by the same
  // backend).
  int64_t block = 1024;
  const void* embedding = nullptr;
  const PackedForm* const* packed_blocks = nullptr;
  int64_t m = 1;          // best tokens kept per row
  int64_t excluded = -1;  // a token never returned (its probability still counts in the normaliser)
  const float* bias = nullptr;  // [vocab] added to the logits, or none
};

// ---- losses and optimizers ----

struct CrossEntropySums {
  double loss = 0;     // sum over counted rows of -sum_j q_j log p_j
  double nll = 0;      // sum over counted rows of -log p_target
  int64_t tokens = 0;  // rows whose target is not ignore_index; < 0: a target was out of range
};

struct AdamStep {
  float beta1 = 0.9f, beta2 = 0.98f;
  float step_size = 0.0f;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float eps = 1e-9f;
  float keep = 1.0f;  // 1 - lr * weight_decay: AdamW's decoupled decay of p first; 1: none
};

}  // namespace tfm::internal::kernels
