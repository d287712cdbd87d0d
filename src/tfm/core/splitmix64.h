// splitmix64's finaliser (Steele, Lea and Flood 2014): a bijection of 64-bit words whose output
// bits each depend on every input bit. The data layer's draws (shuffles, BPE-dropout keys, word
// dropout) and sampled decoding's are keyed by it, so that they are pure functions of the seed and
// a position (the batch's, the sample's).
#pragma once

#include <cstdint>

namespace tfm::internal {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace tfm::internal
