// Inverted dropout on the GPU (dropout_cpu.h): the keep mask is the CPU's, a pure function of
// (seed, element index), so both devices drop the same elements and scale them the same.
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

// y[i] = x[i] / (1 - p) when element i is kept, else 0. 0 <= p < 1.
void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed);
// dx (+)= g / (1 - p) on the kept elements (the same mask as the forward with this seed).
void dropout_backward(const float* g, float* dx, int64_t n, float p, uint64_t seed,
                      bool accumulate);

}  // namespace tfm::internal::cuda
