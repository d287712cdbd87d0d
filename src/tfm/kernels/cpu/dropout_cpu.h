// Inverted dropout with a counter-based mask: whether element i is kept is a pure function of
// (seed, i), so the mask is the same for any thread count and the backward recomputes it instead of
// storing it. The attention kernels' own mask is attention_dropout_keep (attention_cpu.h).
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// splitmix64's finaliser: a bijection of 64-bit words whose output bits each depend on every input
// bit, so consecutive counters give independent-looking words.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform number in [0, 1) with 24 random bits (exact in f32) for element `index` of stream
// `seed`. The seed is mixed first so that nearby seeds give unrelated streams, not shifted copies.
inline float dropout_uniform(uint64_t seed, uint64_t index) {
  uint64_t h = mix64(mix64(seed) + index * 0x9e3779b97f4a7c15ull);
  return static_cast<float>(h >> 40) * 0x1p-24f;
}

// True when element `index` survives dropout with probability p (keep when u >= p: P = 1 - p).
inline bool dropout_keep(uint64_t seed, uint64_t index, float p) {
  return dropout_uniform(seed, index) >= p;
}

// y[i] = x[i] / (1 - p) when element i is kept, else 0. 0 <= p < 1.
void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed);
// dx (+)= g / (1 - p) on the kept elements (the same mask as the forward with this seed).
void dropout_backward(const float* g, float* dx, int64_t n, float p, uint64_t seed,
                      bool accumulate);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
