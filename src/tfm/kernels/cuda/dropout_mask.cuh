// dropout_cpu.h's counter-based keep mask for device code: the same functions, bit for bit, so that
// a CUDA kernel drops exactly the elements the CPU kernel drops for a (seed, element index).
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

// splitmix64's finaliser (cpu::mix64).
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform number in [0, 1) with 24 random bits, exact in f32 (cpu::dropout_uniform).
__host__ __device__ inline float dropout_uniform(uint64_t seed, uint64_t index) {
  const uint64_t h = mix64(mix64(seed) + index * 0x9e3779b97f4a7c15ull);
  return static_cast<float>(h >> 40) * 0x1p-24f;
}

// True when element `index` survives dropout with probability p (cpu::dropout_keep).
__host__ __device__ inline bool dropout_keep(uint64_t seed, uint64_t index, float p) {
  return dropout_uniform(seed, index) >= p;
}

}  // namespace tfm::internal::cuda
