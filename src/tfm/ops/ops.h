// The device-neutral op API. Each op checks shapes and dtypes, dispatches to a device kernel, and,
// when a tape is current and an input requires a gradient, records its backward (autograd/tape.h).
// Every op's gradient formula sits above the code that computes it, in ops/<op>.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal::ops {

class PackedWeight;  // ops/packed_weight.h

// How linear, linear_relu and output_cross_entropy multiply: the operand type of the product (f32,
// or bf16 with f32 accumulation and an f32 result, as torch.autocast on CPU) and, for inference,
// the weight packed once in that type, or in i8 for either (ops::pack_weight; it must be the
// weight's packed copy). A
// product that records a gradient converts the weight itself (its backward keeps that copy) and
// ignores `packed`.
struct ProductOptions {
  ProductOptions(DType dtype_ = DType::f32, const PackedWeight* packed_ = nullptr,
                 Tensor x_bf16_ = {})
      : dtype(dtype_), packed(packed_), x_bf16(std::move(x_bf16_)) {}

  DType dtype;
  const PackedWeight* packed;
  // For bf16 products: x already rounded to bf16 (to_bf16(x), the same shape), made once by the
  // caller and shared by every product that reads x; undefined: the product rounds x itself.
  Tensor x_bf16;
};

// ---- matrix products (kernels/cpu/matmul_cpu: oneDNN) ----

// c = op(a) @ op(b), batched over leading dimensions. a: [..., M, K] ([..., K, M] when trans_a),
// b: [..., K, N] ([..., N, K] when trans_b) with the same leading dimensions, or rank 2 (shared by
// every batch). f32 in, f32 out.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// y = x W^T + bias, as torch.nn.Linear. x: [..., in], weight: [out, in], bias: [out] or undefined.
// x, weight and bias are f32; `product` says how the product multiplies (f32 by default).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ProductOptions& product = {});

// Inference: linear(x, w, b, {dtype, packed}) for 1 to 4 weights packed in the same product type,
// all of x's width, each with its bias (or undefined): the same bits, in one call, which on the
// CPU shares one parallel region where the weights are int8 (x quantised once) or f32 in panels (a
// decoding step's queries, keys and values). Tensors that need a gradient are refused.
std::vector<Tensor> packed_linears(const Tensor& x, const std::vector<const PackedWeight*>& weights,
                                   const std::vector<Tensor>& biases);

// relu(linear(x, weight, bias)) as one product (oneDNN's relu post-op), with the same product
// options as linear. Keeps only the output for the backward (the pre-activation is never stored):
// the gradient is masked where the output is 0, then goes through linear's backward.
Tensor linear_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                   const ProductOptions& product = {});

// swish(linear(x, weight, bias, product)) and gelu(linear(...)); with a packed weight in inference,
// one product that applies the activation in its stores (on the CPU's panel kernels; the same bits
// either way).
Tensor linear_swish(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                    const ProductOptions& product = {});
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                   const ProductOptions& product = {});

// The feed-forward network linear(linear_relu(x, w1, b1), w2, b2) with products in `precision`.
// Under bf16 products, on a backend with relu_backward_product_bf16 (the CPU), its hidden layer
// is kept only in bf16 (it is rounded in its product's store, and the backward masks with it): the
// f32 hidden layer, its conversion and its copy for the backward are never made, and the results
// have linear_relu's and linear's bits but where a hidden value below 2^-133 rounds to 0 (as under
// PyTorch's autocast). Elsewhere it is those two ops.
Tensor relu_feed_forward(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                         const Tensor& b2, DType precision);

// ---- element-wise and normalisation ----

Tensor add(const Tensor& a, const Tensor& b);  // same shapes
Tensor relu(const Tensor& x);
// The FFN's other activations (config "activation"): gelu(x) = x Phi(x) with the normal CDF
// Phi (the erf form, PyTorch's and fairseq's default "gelu"), swish(x) = x sigmoid(x) (SiLU).
// Each keeps its input for the backward.
Tensor gelu(const Tensor& x);
Tensor swish(const Tensor& x);

// Inverted dropout: keeps an element with probability 1-p and scales it by 1/(1-p). The keep mask
// is a pure function of (seed, element index): reproducible, independent of threading, never stored
// (the backward recomputes it). p = 0 returns x itself.
Tensor dropout(const Tensor& x, float p, uint64_t seed);

// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * gamma + beta (biased var).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);

// layer_norm(x + dropout(branch, p, seed), gamma, beta, eps), the end of a post-norm sub-layer, in
// one pass over the rows. The dropout mask is ops::dropout's for this seed (recomputed in the
// backward, never stored), so the result equals the unfused ops' bit for bit. x and branch: same
// shape [..., d]; p = 0 adds branch as it is.
Tensor add_dropout_layer_norm(const Tensor& x, const Tensor& branch, float p, uint64_t seed,
                              const Tensor& gamma, const Tensor& beta, float eps);

// The step of a pre-norm residual stream, in the same one pass: sum = x + dropout(branch, p, seed)
// (the stream, which the next sub-layer adds to) and normed = layer_norm(sum, gamma, beta, eps)
// (the next sub-layer's input). Both outputs carry gradients: the backward adds sum's gradient to
// the one that comes through the norm. Equals the unfused ops bit for bit, as above.
struct SumAndNorm {
  Tensor sum;
  Tensor normed;
};
SumAndNorm add_dropout_then_layer_norm(const Tensor& x, const Tensor& branch, float p,
                                       uint64_t seed, const Tensor& gamma, const Tensor& beta,
                                       float eps);

// Softmax over the last dimension.
Tensor softmax(const Tensor& x);

// A view with another shape (same number of elements); the gradient is reshaped back.
Tensor reshape(const Tensor& x, const Shape& shape);

// ---- embeddings ----

// out[..., :] = scale * table[ids[...], :]; ids: i32 of any shape, table: [V, d]. The gradient of
// rows used several times is accumulated.
Tensor embedding(const Tensor& ids, const Tensor& table, float scale);

// out[b, t, :] = x[b, t, :] + table[t, :]: positional encodings added to x: [B, T, d] from a
// table [T_max, d] (T <= T_max). The table gets a gradient when it requires one (learned
// positions). `offset` shifts the positions (incremental decoding: position offset + t).
Tensor add_positions(const Tensor& x, const Tensor& table, int64_t offset = 0);

// ---- attention ----

struct AttentionMask {
  // Keys at or past key_lengths[b] are padding and get no weight (empty: no padding).
  std::vector<int32_t> key_lengths;
  // Query t may attend to keys <= t + query_offset (decoder self-attention).
  bool causal = false;
  int64_t query_offset = 0;
};

// Scaled dot-product attention with `heads` heads on projected inputs laid out as projections
// produce them: q: [B, Tq, h*dk], k: [B, Tk, h*dk], v: [B, Tk, h*dv]. Head i uses columns
// [i*dk, (i+1)*dk). For each head: softmax(q k^T / sqrt(dk) + mask) v; output [B, Tq, h*dv] with
// the heads concatenated. dropout_p > 0 drops attention weights (Table 3's optional attention
// dropout). When `probs_out` is given it receives the attention weights [B, h, Tq, Tk] (before
// dropout). precision bf16 (training under bf16 autocast) lets a backend with fused attention
// kernels (CUDA) multiply in bf16 with f32 accumulation and not keep P for the backward, when
// gradients are recorded, no probabilities are asked for and q, k, v are three tensors; otherwise,
// and on the CPU, the products are f32.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                 const AttentionMask& mask, float dropout_p = 0.0f, uint64_t seed = 0,
                 Tensor* probs_out = nullptr, DType precision = DType::f32);

// Attention over the first `keys` positions of key/value buffers that have room for more, as an
// incremental decoder keeps them (nn::KeyValueCache): k: [B, capacity, h*dk], v: [B, capacity,
// h*dv], 1 <= keys <= capacity. q, mask and probs_out ([B, h, Tq, keys]) as in attention(), without
// dropout. Inference only: records no backward and refuses inputs that would need one.
// slots (optional, i32 [B, >= keys]): batch b's position j is in row slots[b, j] of k and v, which
// may then have any number of rows; undefined: in row b. k and v may both be bf16 (read as f32).
Tensor attention_cached(const Tensor& q, const Tensor& k, const Tensor& v, int64_t keys, int heads,
                        const AttentionMask& mask, Tensor* probs_out = nullptr,
                        const Tensor& slots = Tensor());

// ---- loss ----

struct CrossEntropyResult {
  Tensor loss;         // scalar: the label-smoothed loss summed over counted rows / normalizer
  int64_t tokens = 0;  // rows whose target is not ignore_index
  double nll_sum = 0;  // sum of -log p(target) over counted rows (for perplexity)
  // paired_output_cross_entropy only: the sum of the pairs' (KL(p || q) + KL(q || p)) / 2
  double consistency_sum = 0;
};

// Label-smoothed cross-entropy as torch.nn.functional.cross_entropy(label_smoothing=eps): for a row
// with target y, q = (1 - eps) onehot(y) + eps / V and loss_row = -sum_j q_j log softmax(z)_j.
// logits: [N, V] f32, targets: [N] i32. Rows with target == ignore_index count nothing.
// normalizer <= 0 means the number of counted rows (the mean).
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, float label_smoothing,
                                 int32_t ignore_index, double normalizer = 0.0);

// cross_entropy(linear(hidden, weight), targets, ...) (the pre-softmax projection and its loss)
// without ever holding the [N, V] logits: the rows go through in chunks of `chunk_rows` (0: a
// default that keeps a chunk's f32 logits under 80 MB: 512 rows for 37000 words), and when a
// gradient is needed each chunk's share of d(hidden) and d(weight) is computed while its logits are
// at hand (the gradient is linear in the upstream one; ops/output_loss.cc). hidden: [..., d] f32
// with N rows, weight: [V, d], targets: [N] i32. With product bf16 the products take bf16 operands
// (the weight converted once per call), as in linear.
CrossEntropyResult output_cross_entropy(const Tensor& hidden, const Tensor& weight,
                                        const Tensor& targets, float label_smoothing,
                                        int32_t ignore_index, double normalizer = 0.0,
                                        int64_t chunk_rows = 0, DType product = DType::f32);
// R-Drop (Liang et al. 2021): output_cross_entropy of hidden states whose rows are two forward
// passes (with their own dropout) of the same targets, rows [0, N/2) and [N/2, N), plus
// `consistency_weight` times each pair's (KL(p || q) + KL(q || p)) / 2, p and q the two rows'
// softmax(h W^T):
//   loss = (sum_r ce_r + weight sum_{r < N/2, counted} kl_r) / normalizer.
// targets: [N] i32, each row of the first half equal to its pair's. CPU only so far.
CrossEntropyResult paired_output_cross_entropy(const Tensor& hidden, const Tensor& weight,
                                               const Tensor& targets, float label_smoothing,
                                               int32_t ignore_index, float consistency_weight,
                                               double normalizer = 0.0, int64_t chunk_rows = 0,
                                               DType product = DType::f32);
// The rows of output_cross_entropy's chunks by default (chunk_rows 0) on `device`: what a memory
// estimate (train/batch_size.h) charges for its [rows, V] logits.
int64_t output_cross_entropy_chunk_rows(int64_t vocab, Device device);

// ---- decoding (inference: no backward is recorded) ----

// log softmax over the last dimension of f32 [rows, n]: x - log(sum(exp(x))) per row.
Tensor log_softmax(const Tensor& x);

struct TopK {
  Tensor values;   // f32 [rows, k], each row's best first (ties: the lower index)
  Tensor indices;  // i32 [rows, k]
  Tensor counts;   // i32 [rows]: entries filled (fewer than k when fewer are finite)
};
// The k largest entries of each row of f32 x [rows, n] (k may exceed n), never index `excluded`
// (< 0: none).
// -inf and NaN entries are never returned; unfilled entries are left unspecified.
TopK top_k(const Tensor& x, int64_t k, int64_t excluded = -1);

// The k most probable tokens of log_softmax(hidden embedding^T) per row, without the [rows, V]
// logits (kernels/cpu/log_softmax_top_cpu.h): hidden [rows, d] f32 or bf16, embedding [V, d]
// (f32, or bf16 like hidden); or, when `packed` is not empty, the embedding as one packed weight
// per `block` tokens (ops::packed_weight), of hidden's type, or i8 with f32 hidden (quantised
// once per row for every block).
// `bias` (f32 [V], on hidden's device, or undefined) is added to the logits (the output
// projection's bias of config output_bias).
TopK output_log_softmax_top(const Tensor& hidden, const Tensor& embedding, int64_t k,
                            int64_t excluded,
                            const std::vector<std::shared_ptr<const PackedWeight>>& packed,
                            int64_t block, const Tensor& bias = {});

// Key/value cache updates (nn::KeyValueCache) on [rows, capacity, width] buffers, f32 or bf16:
// cache[r, position + j, :] = values[r, j, :] for values [rows <= cache rows, n, width] of the
// cache's type.
void cache_write(const Tensor& cache, const Tensor& values, int64_t position);
// dst[r, j, :] = src[slot(rows[r], j), j, :] for j < positions, where slot(row, j) = slots[row, j]
// (i32 [>= src rows, >= positions], host bookkeeping) or row when slots is undefined.
void cache_gather(const Tensor& src, const Tensor& slots, const std::vector<int64_t>& rows,
                  int64_t positions, const Tensor& dst);

// ---- optimizer (in place on parameters and gradients; no tape) ----

struct AdamStepOptions {
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;
  float step_size = 0.0f;     // lr / (1 - beta1^t)
  float inv_sqrt_bc2 = 1.0f;  // 1 / sqrt(1 - beta2^t)
  float keep = 1.0f;          // 1 - lr * weight_decay (AdamW); 1: no decay
};
// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
// p = keep p - step_size m / (sqrt(v) inv_sqrt_bc2 + eps)
// param, grad, m, v: f32 of one shape, on one device.
void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
               const AdamStepOptions& options);

// sqrt(sum over the tensors of sum x^2), accumulated in double; undefined tensors are skipped.
double global_norm(const std::vector<Tensor>& tensors);
// x *= scale for each defined tensor (f32).
void scale_in_place(const std::vector<Tensor>& tensors, float scale);
// x = value for each defined tensor (f32), whatever it held (NaN included).
void fill_in_place(const std::vector<Tensor>& tensors, float value);
// average = decay * average + (1 - decay) * x, in place; f32 tensors of one shape on one device.
void moving_average(const Tensor& average, const Tensor& x, float decay);

}  // namespace tfm::internal::ops
