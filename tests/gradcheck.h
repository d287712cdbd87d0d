// The op test pattern: an op's f32 forward is compared with a plain double-precision reference on
// random inputs, and its backward with central finite differences of that double reference.
//
//   loss(x) = sum_i r_i * f(x)_i  for a random r;  dloss/dx_j ~ (loss(x + h e_j) - loss(x - h e_j))
//   / 2h
//
// The op's analytic backward is seeded with d(out) = r through the tape and must match.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "tfm/autograd/tape.h"
#include "tfm/core/tensor.h"

namespace tfm::internal::testing {

using Values = std::vector<double>;

struct Input {
  Shape shape;
  Values values;
  bool differentiable = true;
};

// Uniform random values in [lo, hi).
inline Values random_values(int64_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Values v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

inline Tensor to_tensor(const Input& in) {
  std::vector<float> f(in.values.begin(), in.values.end());
  Tensor t = Tensor::from_floats(in.shape, f);
  t.set_requires_grad(in.differentiable);
  return t;
}

// Asserts |a - b| <= atol * max|b| + rtol * |b| element-wise, naming the first mismatch. The
// absolute part is relative to the tensor's scale, so a tensor of small values is held to the same
// standard as one of large values.
inline void expect_close(const std::vector<float>& actual, const Values& expected, double rtol,
                         double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double max_abs = 0;
  for (double e : expected) max_abs = std::max(max_abs, std::fabs(e));
  ASSERT_GT(max_abs, 0.0) << what << ": the expected values are all zero, which tests nothing";
  for (size_t i = 0; i < actual.size(); ++i) {
    double diff = std::fabs(actual[i] - expected[i]);
    ASSERT_LE(diff, atol * max_abs + rtol * std::fabs(expected[i]))
        << what << " differs at element " << i << ": got " << actual[i] << ", expected "
        << expected[i];
  }
}

struct GradCheckOptions {
  double forward_rtol = 1e-5;
  double forward_atol = 1e-6;
  double grad_rtol = 1e-3;
  double grad_atol = 1e-4;
  double step = 1e-6;  // finite-difference step, in double precision
  unsigned seed = 1234;
};

// op: our forward on f32 tensors (runs with a current tape).
// reference: the same function in double precision on the flat input values.
inline void check_op(const std::vector<Input>& inputs,
                     const std::function<Tensor(const std::vector<Tensor>&)>& op,
                     const std::function<Values(const std::vector<Values>&)>& reference,
                     const GradCheckOptions& options = {}) {
  std::vector<Tensor> tensors;
  std::vector<Values> values;
  for (const Input& in : inputs) {
    tensors.push_back(to_tensor(in));
    values.push_back(in.values);
  }
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    out = op(tensors);
  }
  Values expected = reference(values);
  expect_close(out.to_floats(), expected, options.forward_rtol, options.forward_atol, "forward");

  // Output weights of magnitude in [0.5, 1.5) with random signs: a weight near zero would shrink
  // the gradient of a scalar output below any tolerance and test nothing.
  std::mt19937 rng(options.seed);
  Values r = random_values(out.numel(), rng, 0.5, 1.5);
  std::bernoulli_distribution negative(0.5);
  for (double& w : r)
    if (negative(rng)) w = -w;
  tape.backward(out, Tensor::from_floats(out.shape(), std::vector<float>(r.begin(), r.end())));

  auto weighted = [&](const std::vector<Values>& v) {
    Values y = reference(v);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += r[i] * y[i];
    return s;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].differentiable) continue;
    Values numeric(values[k].size());
    for (size_t j = 0; j < values[k].size(); ++j) {
      std::vector<Values> plus = values, minus = values;
      plus[k][j] += options.step;
      minus[k][j] -= options.step;
      numeric[j] = (weighted(plus) - weighted(minus)) / (2 * options.step);
    }
    Tensor grad = tensors[k].grad();
    ASSERT_TRUE(grad.defined()) << "no gradient reached input " << k;
    expect_close(grad.to_floats(), numeric, options.grad_rtol, options.grad_atol,
                 "gradient of input " + std::to_string(k));
  }
}

}  // namespace tfm::internal::testing
