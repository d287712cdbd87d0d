#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/core/threading.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_f32_values;
using testing::Values;

constexpr float kEps = 1e-5f;

// Double-precision LayerNorm over rows of width d.
Values layer_norm_reference(const Values& x, const Values& gamma, const Values& beta, double eps) {
  const size_t d = gamma.size();
  Values y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    const double* xr = x.data() + r * d;
    double mean = 0, var = 0;
    for (size_t j = 0; j < d; ++j) mean += xr[j];
    mean /= static_cast<double>(d);
    for (size_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(d);
    for (size_t j = 0; j < d; ++j)
      y[r * d + j] = (xr[j] - mean) / std::sqrt(var + eps) * gamma[j] + beta[j];
  }
  return y;
}

TEST(OpsLayerNorm, ForwardAndGradientsOfXGammaBeta) {
  std::mt19937 rng(61);
  for (const Shape& shape : {Shape{4, 8}, Shape{2, 3, 33}, Shape{5, 2}}) {
    SCOPED_TRACE(shape.str());
    const int64_t d = shape[-1];
    testing::check_op(
        {{shape, random_f32_values(shape.numel(), rng, -2.0, 2.0)},
         {Shape{d}, random_f32_values(d, rng, 0.5, 1.5)},
         {Shape{d}, random_f32_values(d, rng, -1.0, 1.0)}},
        [](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], t[1], t[2], kEps); },
        [](const std::vector<Values>& v) {
          return layer_norm_reference(v[0], v[1], v[2], static_cast<double>(kEps));
        });
  }
}

// Fixed (non-learned) gamma and beta: only x gets a gradient; and a constant x with learned ones.
TEST(OpsLayerNorm, GradientsOfSomeInputsOnly) {
  std::mt19937 rng(62);
  Shape shape{3, 6};
  Values x = random_f32_values(18, rng), gamma = random_f32_values(6, rng, 0.5, 1.5),
         beta = random_f32_values(6, rng);
  auto op = [](const std::vector<Tensor>& t) { return ops::layer_norm(t[0], t[1], t[2], kEps); };
  auto reference = [](const std::vector<Values>& v) {
    return layer_norm_reference(v[0], v[1], v[2], static_cast<double>(kEps));
  };
  testing::check_op({{shape, x}, {Shape{6}, gamma, false}, {Shape{6}, beta, false}}, op, reference);
  testing::check_op({{shape, x, false}, {Shape{6}, gamma}, {Shape{6}, beta}}, op, reference);
}

// Rows far from zero: a one-pass E[x^2] - E[x]^2 variance would lose every digit here. The f32
// mean of values near 100 is itself only known to half an ulp of 100 (3.8e-6), which moves xhat
// by up to 3.8e-6 / std (std ~ 0.58) times gamma (< 1.5): about 1e-5, hence the atol.
TEST(OpsLayerNorm, StableForRowsWithALargeMean) {
  std::mt19937 rng(63);
  const int64_t rows = 6, d = 64;
  Values x = random_f32_values(rows * d, rng, 99.0, 101.0);
  Values gamma = random_f32_values(d, rng, 0.5, 1.5), beta = random_f32_values(d, rng);
  Tensor y = ops::layer_norm(Tensor::from_floats({rows, d}, testing::to_float_vector(x)),
                             Tensor::from_floats({d}, testing::to_float_vector(gamma)),
                             Tensor::from_floats({d}, testing::to_float_vector(beta)), kEps);
  testing::expect_close(y.to_floats(), layer_norm_reference(x, gamma, beta, kEps), 1e-5, 2e-5,
                        "layer_norm of rows near 100");
}

// Above the parallel threshold, with a row count that leaves a partial backward chunk; against
// the analytic gradients in double precision.
TEST(OpsLayerNorm, LargeInputMatchesAnalyticGradients) {
  std::mt19937 rng(64);
  const int64_t rows = 301, d = 160;
  Values x = random_f32_values(rows * d, rng, -3.0, 3.0), g = random_f32_values(rows * d, rng);
  Values gamma = random_f32_values(d, rng, 0.5, 1.5), beta = random_f32_values(d, rng);
  Tensor tx = Tensor::from_floats({rows, d}, testing::to_float_vector(x));
  Tensor tg = Tensor::from_floats({d}, testing::to_float_vector(gamma));
  Tensor tb = Tensor::from_floats({d}, testing::to_float_vector(beta));
  for (Tensor* t : {&tx, &tg, &tb}) t->set_requires_grad(true);
  Tensor y = testing::forward_backward([&] { return ops::layer_norm(tx, tg, tb, kEps); }, g);

  Values dx(x.size()), dgamma(d, 0.0), dbeta(d, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * d;
    const double* gr = g.data() + r * d;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < d; ++j) mean += xr[j] / d;
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean) / d;
    double rstd = 1 / std::sqrt(var + kEps), m1 = 0, m2 = 0;
    for (int64_t j = 0; j < d; ++j) {
      double xhat = (xr[j] - mean) * rstd;
      dgamma[j] += gr[j] * xhat;
      dbeta[j] += gr[j];
      m1 += gr[j] * gamma[j] / d;
      m2 += gr[j] * gamma[j] * xhat / d;
    }
    for (int64_t j = 0; j < d; ++j)
      dx[r * d + j] = rstd * (gr[j] * gamma[j] - m1 - (xr[j] - mean) * rstd * m2);
  }
  testing::expect_close(y.to_floats(), layer_norm_reference(x, gamma, beta, kEps), 1e-5, 1e-5,
                        "forward");
  // f32 sums of up to d (dx) or rows (dgamma, dbeta) terms of size ~1.
  testing::expect_close(tx.grad().to_floats(), dx, 1e-4, 1e-5, "dx");
  testing::expect_close(tg.grad().to_floats(), dgamma, 1e-4, 1e-4, "dgamma");
  testing::expect_close(tb.grad().to_floats(), dbeta, 1e-4, 1e-4, "dbeta");
}

TEST(OpsLayerNorm, ParameterGradientsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(65);
  const int64_t rows = 500, d = 96;
  Tensor x =
      Tensor::from_floats({rows, d}, testing::to_float_vector(random_f32_values(rows * d, rng)));
  Tensor gamma = Tensor::full({d}, 1.25f);
  Tensor beta = Tensor::full({d}, -0.5f);
  gamma.set_requires_grad(true);
  Values seed = random_f32_values(rows * d, rng);
  auto run = [&](int threads) {
    set_num_threads(threads);
    gamma.zero_grad();
    testing::forward_backward([&] { return ops::layer_norm(x, gamma, beta, kEps); }, seed);
    return gamma.grad().to_floats();
  };
  const int threads = num_threads();
  std::vector<float> one = run(1), many = run(std::max(threads, 2));
  set_num_threads(threads);
  EXPECT_EQ(one, many);
}

TEST(OpsLayerNorm, BadArgumentsThrow) {
  Tensor x = Tensor::zeros({2, 4});
  Tensor ones = Tensor::full({4}, 1.0f);
  EXPECT_THROW(ops::layer_norm(x, Tensor::full({3}, 1.0f), ones, kEps), Error);
  EXPECT_THROW(ops::layer_norm(x, ones, Tensor::full({2, 2}, 0.0f), kEps), Error);
  EXPECT_THROW(ops::layer_norm(Tensor::zeros({2, 4}, DType::i32), ones, ones, kEps), Error);
  EXPECT_THROW(ops::layer_norm(x, ones, ones, 0.0f), Error);
  EXPECT_THROW(ops::layer_norm(x, ones, Tensor(), kEps), Error);
}

}  // namespace
}  // namespace tfm::internal
