// What a forward pass needs to know besides its inputs: training or inference, the product type
// of its matrix products, and where dropout masks come from. Every dropout call takes a fresh seed
// from (step seed, call counter), so a training step is reproducible from its seed alone, whatever
// the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/dtype.h"
#include "tfm/core/tensor.h"
#include "tfm/ops/autocast.h"

namespace tfm::internal::nn {

class ForwardContext {
 public:
  // precision: the operand type of the products (ops::ProductOptions): f32, or bf16 (f32
  // accumulation; everything else stays f32).
  static ForwardContext inference(DType precision = DType::f32) {
    return ForwardContext(false, 0, precision);
  }
  static ForwardContext training(uint64_t seed, DType precision = DType::f32) {
    return ForwardContext(true, seed, precision);
  }

  bool is_training() const { return training_; }
  DType precision() const { return precision_; }
  // Dropout probability to apply: p in training, 0 in inference.
  float dropout(float p) const { return training_ ? p : 0.0f; }
  // Attention weights handed out for looking at them (tfm attention): while a list is set, every
  // MultiHeadAttention::forward appends its weights [B, h, Tq, Tk] to it, in the order the pass
  // runs them (encoder layers; per decoder layer its self-, then its encoder-decoder attention).
  void record_attention(std::vector<Tensor>* out) { attention_out_ = out; }
  std::vector<Tensor>* attention_record() const { return attention_out_; }
  // For bf16 products: x rounded to bf16 (ops::to_bf16), for the caller to share between the
  // products that read x (self-attention's q, k and v projections). Undefined for f32 products,
  // or when sharing is off (each product then rounds its own operand, with the same bits).
  Tensor bf16_copy(const Tensor& x) const {
    return precision_ == DType::bf16 && share_bf16_ ? ops::to_bf16(x) : Tensor{};
  }
  // As bf16_copy, and kept for later calls with the same tensor: every decoder layer's
  // cross-attention reads one copy of the encoder's output. The context keeps one copy, of the
  // last tensor asked for. Only for activations, which nothing writes after they are made; the
  // copy's source is kept with it, so its memory cannot be reused for another tensor meanwhile.
  Tensor shared_bf16(const Tensor& x) {
    if (precision_ != DType::bf16 || !share_bf16_) return {};
    const bool same = shared_source_.same_storage(x) && shared_source_.defined() &&
                      shared_source_.device_raw() == x.device_raw() &&
                      shared_source_.shape() == x.shape();
    if (!same) {
      shared_source_ = x;
      shared_copy_ = ops::to_bf16(x);
    }
    return shared_copy_;
  }
  // Off: bf16_copy and shared_bf16 give nothing (tests compare with the unshared path).
  void share_bf16_copies(bool on) { share_bf16_ = on; }
  // A distinct seed for the next random op (splitmix64 of the step seed and a counter).
  uint64_t next_seed() {
    uint64_t z = seed_ + 0x9e3779b97f4a7c15ull * ++counter_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  ForwardContext(bool training, uint64_t seed, DType precision)
      : training_(training), seed_(seed), precision_(precision) {}
  bool training_;
  uint64_t seed_;
  DType precision_;
  uint64_t counter_ = 0;
  std::vector<Tensor>* attention_out_ = nullptr;
  bool share_bf16_ = true;
  Tensor shared_source_, shared_copy_;  // shared_bf16's
};

}  // namespace tfm::internal::nn
