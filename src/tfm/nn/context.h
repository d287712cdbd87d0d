// What a forward pass needs to know besides its inputs: training or inference, the product type
// of its matrix products, and where dropout masks come from. Every dropout call takes a fresh seed
// from (step seed, call counter), so a training step is reproducible from its seed alone, whatever
// the thread count.
#pragma once

#include <cstdint>
#include <utility>
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
  // For bf16 products: x rounded to bf16 (ops::to_bf16), made once per context and shared by
  // every later call with the same tensor: self-attention's q, k and v projections read one copy
  // of their input, and every decoder layer's cross-attention keys and values one copy of the
  // encoder's output. Undefined for f32 products, or when sharing is off (each product then
  // rounds its own operand, with the same bits). Only for activations, which nothing writes after
  // they are made; the memo holds x, so x's memory is not reused for another tensor meanwhile.
  Tensor shared_bf16(const Tensor& x) {
    if (precision_ != DType::bf16 || !share_bf16_) return {};
    for (const auto& [source, copy] : bf16_copies_)
      if (source.same_storage(x) && source.device_raw() == x.device_raw() &&
          source.shape() == x.shape())
        return copy;
    bf16_copies_.emplace_back(x, ops::to_bf16(x));
    return bf16_copies_.back().second;
  }
  // Off: shared_bf16 gives nothing (tests compare the shared copies with the unshared path).
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
  std::vector<std::pair<Tensor, Tensor>> bf16_copies_;  // (source, its bf16 copy)
};

}  // namespace tfm::internal::nn
