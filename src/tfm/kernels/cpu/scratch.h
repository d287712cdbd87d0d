// A thread's reusable scratch buffers for the kernels.
#pragma once

#include <cstddef>
#include <vector>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The first n elements of `buffer`, for the caller to overwrite: the buffer grows but never
// shrinks. std::vector::resize value-initialises every element it adds, also those it adds back
// after shrinking, so a buffer whose calls alternate between two sizes would be zero-filled again
// at every growth (a decoding step's int8 products: 128 x 512 and 128 x 2048 activations).
template <class T>
T* scratch(std::vector<T>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
