// Helpers shared by the op tests (tests/test_ops_*.cc) beyond gradcheck.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

// The number of elements of two tensors of one shape whose bits differ.
inline int64_t differing_bits(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  int64_t differ = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    differ += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
  return differ;
}

// max |a - b| / max |b| (max |a - b| where b is all zeros).
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// log softmax(h_r W^T) in double, for h [rows, d] and W [vocab, d] (an output projection's loss).
inline Values log_softmax_of_product(const Values& h, const Values& w, int64_t r, int64_t d,
                                     int64_t vocab) {
  Values z(static_cast<size_t>(vocab));
  for (int64_t j = 0; j < vocab; ++j) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k) s += h[r * d + k] * w[j * d + k];
    z[j] = s;
  }
  const double max = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (double v : z) sum += std::exp(v - max);
  const double lse = max + std::log(sum);
  for (double& v : z) v -= lse;
  return z;
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
