// The CPU's attention-dropout mask (cpu::attention_dropout_keep) for device code, bit for bit:
// element (b, head, t, j) of P, index ((b*h + head)*Tq + t)*Tk + j, survives when a hash of the
// seed and the index is at least p. Shared by the row kernels and the fused kernels.
#pragma once

#include <cstdint>

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

__device__ inline uint64_t attention_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline bool attention_dropout_keep(uint64_t seed, uint64_t index, float p) {
  const float u =
      static_cast<float>(attention_splitmix64(attention_splitmix64(seed) ^ index) >> 40) * 0x1p-24f;
  return u >= p;
}

// 1 / (1 - p): the scale of a kept weight.
__device__ inline float attention_keep_scale(const kernels::AttentionDropout& drop) {
  return drop.p > 0.0f ? 1.0f / (1.0f - drop.p) : 1.0f;
}

}  // namespace tfm::internal::cuda
