// What a forward pass needs to know besides its inputs: training or inference, the product type
// of its matrix products, and where dropout masks come from. Every dropout call takes a fresh seed
// from (step seed, call counter), so a training step is reproducible from its seed alone, whatever
// the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/dtype.h"
#include "tfm/core/tensor.h"

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
};

}  // namespace tfm::internal::nn
