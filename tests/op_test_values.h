// Helpers shared by the op tests (tests/test_ops_*.cc) beyond gradcheck.h.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

#include "gradcheck.h"
#include "tfm/autograd/tape.h"
#include "tfm/core/tensor.h"

namespace tfm::internal::testing {

// Uniform random values that are exact f32 numbers, so that the double reference sees the very
// inputs the f32 op sees (to_tensor would otherwise round them, an error of up to half an ulp of
// the input that the reference does not share).
inline Values random_f32_values(int64_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  Values v = random_values(n, rng, lo, hi);
  for (double& x : v) x = static_cast<float>(x);
  return v;
}

inline std::vector<float> to_float_vector(const Values& v) {
  return {v.begin(), v.end()};
}

// Runs `op` with a tape and back-propagates `seed` (same shape as the output) through it.
inline Tensor forward_backward(const std::function<Tensor()>& op, const Values& seed) {
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    out = op();
  }
  tape.backward(out, Tensor::from_floats(out.shape(), to_float_vector(seed)));
  return out;
}

}  // namespace tfm::internal::testing
