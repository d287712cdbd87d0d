// What a forward pass needs to know besides its inputs: training or inference, and where dropout
// masks come from. Every dropout call takes a fresh seed from (step seed, call counter), so a
// training step is reproducible from its seed alone, whatever the thread count.
#pragma once

#include <cstdint>

namespace tfm::nn {

class ForwardContext {
 public:
  static ForwardContext inference() { return ForwardContext(false, 0); }
  static ForwardContext training(uint64_t seed) { return ForwardContext(true, seed); }

  bool is_training() const { return training_; }
  // Dropout probability to apply: p in training, 0 in inference.
  float dropout(float p) const { return training_ ? p : 0.0f; }
  // A distinct seed for the next random op (splitmix64 of the step seed and a counter).
  uint64_t next_seed() {
    uint64_t z = seed_ + 0x9e3779b97f4a7c15ull * ++counter_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  ForwardContext(bool training, uint64_t seed) : training_(training), seed_(seed) {}
  bool training_;
  uint64_t seed_;
  uint64_t counter_ = 0;
};

}  // namespace tfm::nn
