// add, relu, gelu, swish, reshape, and gradient accumulation when one tensor feeds several ops.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::check_op;
using testing::Input;
using testing::random_f32_values;
using testing::Values;

const Shape kShapes[] = {Shape{7}, Shape{3, 5}, Shape{2, 3, 17}};

TEST(OpsAdd, ForwardAndGradients) {
  std::mt19937 rng(11);
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.str());
    check_op(
        {{shape, random_f32_values(shape.numel(), rng)},
         {shape, random_f32_values(shape.numel(), rng)}},
        [](const std::vector<Tensor>& t) { return ops::add(t[0], t[1]); },
        [](const std::vector<Values>& v) {
          Values y(v[0].size());
          for (size_t i = 0; i < y.size(); ++i) y[i] = v[0][i] + v[1][i];
          return y;
        });
  }
}

TEST(OpsAdd, SameTensorTwiceAccumulatesBothGradients) {
  std::mt19937 rng(12);
  Shape shape{4, 6};
  check_op(
      {{shape, random_f32_values(shape.numel(), rng)}},
      [](const std::vector<Tensor>& t) { return ops::add(t[0], t[0]); },
      [](const std::vector<Values>& v) {
        Values y(v[0].size());
        for (size_t i = 0; i < y.size(); ++i) y[i] = 2 * v[0][i];
        return y;
      });
}

TEST(OpsAdd, InputWithoutGradientGetsNone) {
  std::mt19937 rng(13);
  Tensor a = Tensor::from_floats({3, 4}, testing::to_float_vector(random_f32_values(12, rng)));
  Tensor b = Tensor::from_floats({3, 4}, testing::to_float_vector(random_f32_values(12, rng)));
  a.set_requires_grad(true);
  Values seed = random_f32_values(12, rng);
  testing::forward_backward([&] { return ops::add(a, b); }, seed);
  EXPECT_FALSE(b.grad().defined());
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().to_floats(), testing::to_float_vector(seed));
}

TEST(OpsAdd, NoTapeRecordsNothing) {
  Tensor a = Tensor::full({2, 2}, 1.5f);
  a.set_requires_grad(true);
  Tensor out = ops::add(a, a);
  EXPECT_FALSE(out.requires_grad());
  EXPECT_EQ(out.to_floats(), (std::vector<float>{3, 3, 3, 3}));
}

TEST(OpsRelu, ForwardAndGradients) {
  std::mt19937 rng(21);
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.str());
    check_op(
        {{shape, random_f32_values(shape.numel(), rng)}},
        [](const std::vector<Tensor>& t) { return ops::relu(t[0]); },
        [](const std::vector<Values>& v) {
          Values y(v[0].size());
          for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(v[0][i], 0.0);
          return y;
        });
  }
}

// gelu (erf form) and swish against double references, their gradients against finite
// differences, over [-4, 4) where both bend (and the tails of gelu's Phi matter).
TEST(OpsGeluSwish, ForwardAndGradients) {
  std::mt19937 rng(23);
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape.str());
    check_op(
        {{shape, random_f32_values(shape.numel(), rng, -4.0, 4.0)}},
        [](const std::vector<Tensor>& t) { return ops::gelu(t[0]); },
        [](const std::vector<Values>& v) {
          Values y(v[0].size());
          for (size_t i = 0; i < y.size(); ++i)
            y[i] = 0.5 * v[0][i] * (1.0 + std::erf(v[0][i] / std::sqrt(2.0)));
          return y;
        });
    check_op(
        {{shape, random_f32_values(shape.numel(), rng, -4.0, 4.0)}},
        [](const std::vector<Tensor>& t) { return ops::swish(t[0]); },
        [](const std::vector<Values>& v) {
          Values y(v[0].size());
          for (size_t i = 0; i < y.size(); ++i) y[i] = v[0][i] / (1.0 + std::exp(-v[0][i]));
          return y;
        });
  }
  // Known values: gelu(1) = Phi(1) = 0.841344746, swish(1) = sigmoid(1) = 0.731058579; far tails.
  const Tensor x = Tensor::from_floats({4}, {1.0f, -1.0f, -30.0f, 30.0f});
  const std::vector<float> g = ops::gelu(x).to_floats(), s = ops::swish(x).to_floats();
  EXPECT_NEAR(g[0], 0.841344746f, 1e-6);
  EXPECT_NEAR(g[1], -0.158655254f, 1e-6);
  EXPECT_EQ(g[2], 0.0f);
  EXPECT_EQ(g[3], 30.0f);
  EXPECT_NEAR(s[0], 0.731058579f, 1e-6);
  EXPECT_NEAR(s[1], -0.268941421f, 1e-6);
  EXPECT_NEAR(s[2], -30.0f * std::exp(-30.0f), 1e-15);
  EXPECT_EQ(s[3], 30.0f);
}

// gelu's erfc approximation (elementwise_cpu.cc) over a dense grid of [-12, 12], both tails
// included, value and slope against double references, relative to the value and to the slope's
// two terms (which cancel near x = -0.75), wherever those are normal floats. In float, rounding
// -x^2/2 alone is a relative error of up to 72 x 2^-24 = 4.3e-6 in the tail's exponential.
TEST(OpsGeluSwish, GeluIsAccurateEverywhere) {
  const int64_t n = 240001;
  std::vector<float> grid(n);
  for (int64_t i = 0; i < n; ++i) grid[i] = -12.0f + 24.0f * static_cast<float>(i) / (n - 1);
  Tensor x = Tensor::from_floats({n}, grid);
  x.set_requires_grad(true);
  const Tensor y = testing::forward_backward([&] { return ops::gelu(x); }, Values(n, 1.0));
  const std::vector<float> value = y.to_floats(), slope = x.grad().to_floats();
  double worst_value = 0, worst_slope = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = grid[i], phi = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double ref_value = v * phi;
    const double x_pdf = v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    const double ref_slope = phi + x_pdf, slope_scale = phi + std::fabs(x_pdf);
    if (std::fabs(ref_value) >= 1e-37)
      worst_value = std::max(worst_value, std::fabs(value[i] - ref_value) / std::fabs(ref_value));
    if (slope_scale >= 1e-37)
      worst_slope = std::max(worst_slope, std::fabs(slope[i] - ref_slope) / slope_scale);
  }
  std::printf("gelu over [-12, 12]: largest relative error %.3g (value), %.3g (slope)\n",
              worst_value, worst_slope);
  EXPECT_LT(worst_value, 1e-5);
  EXPECT_LT(worst_slope, 1e-5);
}

// Sizes above the kernels' parallel threshold, against a direct reference (finite differences
// would take n^2 reference evaluations).
TEST(OpsElementwise, LargeTensorsUseEveryThreadCorrectly) {
  std::mt19937 rng(22);
  const int64_t n = 100003;
  Values a = random_f32_values(n, rng), b = random_f32_values(n, rng),
         g = random_f32_values(n, rng);
  Tensor ta = Tensor::from_floats({n}, testing::to_float_vector(a));
  Tensor tb = Tensor::from_floats({n}, testing::to_float_vector(b));
  ta.set_requires_grad(true);
  tb.set_requires_grad(true);
  // out = relu(a + b) + a: a's gradient is g * [a + b > 0] + g, b's is g * [a + b > 0].
  Tensor out =
      testing::forward_backward([&] { return ops::add(ops::relu(ops::add(ta, tb)), ta); }, g);
  std::vector<float> y = out.to_floats(), ga = ta.grad().to_floats(), gb = tb.grad().to_floats();
  for (int64_t i = 0; i < n; ++i) {
    float sum = static_cast<float>(a[i]) + static_cast<float>(b[i]);
    float relu = sum > 0 ? sum : 0;
    ASSERT_EQ(y[i], relu + static_cast<float>(a[i])) << i;
    ASSERT_EQ(gb[i], sum > 0 ? static_cast<float>(g[i]) : 0.0f) << i;
    ASSERT_EQ(ga[i], (sum > 0 ? static_cast<float>(g[i]) : 0.0f) + static_cast<float>(g[i])) << i;
  }
}

TEST(OpsReshape, SharesStorageAndReshapesTheGradientBack) {
  std::mt19937 rng(31);
  Shape shape{2, 3, 4};
  check_op(
      {{shape, random_f32_values(shape.numel(), rng)}},
      [](const std::vector<Tensor>& t) {
        Tensor r = ops::reshape(t[0], {6, 4});
        EXPECT_TRUE(r.same_storage(t[0]));
        EXPECT_EQ(r.shape(), (Shape{6, 4}));
        // relu(2x) after the reshape: the gradient flows back through both uses of r and the view.
        return ops::relu(ops::add(r, r));
      },
      [](const std::vector<Values>& v) {
        Values y(v[0].size());
        for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(2 * v[0][i], 0.0);
        return y;
      });
}

TEST(OpsReshape, WorksOnIdsWithoutATape) {
  Tensor ids = Tensor::from_ints({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor flat = ops::reshape(ids, {6});
  EXPECT_EQ(flat.to_ints(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
}

// One tensor feeds relu, softmax, layer_norm and reshape; each path's gradient must be added.
TEST(OpsAccumulation, TensorFedToSeveralOpsSumsTheirGradients) {
  std::mt19937 rng(41);
  const int64_t rows = 3, d = 5;
  Shape shape{rows, d};
  Values gamma = random_f32_values(d, rng, 0.5, 1.5), beta = random_f32_values(d, rng);
  check_op(
      {{shape, random_f32_values(shape.numel(), rng)}},
      [&](const std::vector<Tensor>& t) {
        Tensor g = Tensor::from_floats({d}, testing::to_float_vector(gamma));
        Tensor b = Tensor::from_floats({d}, testing::to_float_vector(beta));
        Tensor sum = ops::add(ops::relu(t[0]), ops::softmax(t[0]));
        sum = ops::add(sum, ops::layer_norm(t[0], g, b, 1e-5f));
        return ops::add(sum, ops::reshape(ops::reshape(t[0], {rows * d}), shape));
      },
      [&](const std::vector<Values>& v) {
        const Values& x = v[0];
        Values y(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          const double* xr = x.data() + r * d;
          double max = *std::max_element(xr, xr + d), total = 0, mean = 0, var = 0;
          for (int64_t j = 0; j < d; ++j) total += std::exp(xr[j] - max), mean += xr[j] / d;
          for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean) / d;
          for (int64_t j = 0; j < d; ++j) {
            double ln = (xr[j] - mean) / std::sqrt(var + 1e-5) * gamma[j] + beta[j];
            y[r * d + j] = std::max(xr[j], 0.0) + std::exp(xr[j] - max) / total + ln + xr[j];
          }
        }
        return y;
      });
}

// An op whose output does not feed the loss receives no gradient and must pass none on.
TEST(OpsAccumulation, OutputsOffThePathToTheLossAreSkipped) {
  Tensor x = Tensor::from_floats({4}, {-1.0f, 2.0f, 0.5f, -0.25f});
  x.set_requires_grad(true);
  Tensor unused;
  testing::forward_backward(
      [&] {
        unused = ops::relu(x);
        return ops::add(x, x);
      },
      {1.0, 2.0, 3.0, 4.0});
  EXPECT_EQ(x.grad().to_floats(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_FALSE(unused.grad().defined());
}

// Empty batches (no rows) pass through every op, forward and backward.
TEST(OpsEmptyTensors, EveryOpAcceptsZeroRows) {
  Tensor x = Tensor::zeros({0, 4});
  Tensor gamma = Tensor::full({4}, 1.5f), beta = Tensor::full({4}, 0.5f);
  Tensor table = Tensor::full({3, 4}, 1.0f);
  for (Tensor* t : {&x, &gamma, &beta, &table}) t->set_requires_grad(true);
  Tape tape;
  Tensor out;
  ops::CrossEntropyResult loss;
  {
    TapeScope scope(tape);
    Tensor h = ops::layer_norm(ops::relu(ops::add(x, x)), gamma, beta, 1e-5f);
    h = ops::dropout(ops::softmax(h), 0.5f, 3);
    h = ops::add(h, ops::embedding(Tensor::zeros({0}, DType::i32), table, 2.0f));
    out = ops::reshape(h, {0, 2, 2});
    loss = ops::cross_entropy(h, Tensor::zeros({0}, DType::i32), 0.1f, -100);
  }
  EXPECT_EQ(out.shape(), (Shape{0, 2, 2}));
  EXPECT_EQ(loss.tokens, 0);
  EXPECT_EQ(loss.loss.to_floats(), std::vector<float>{0.0f});
  tape.backward(loss.loss);
  EXPECT_EQ(x.grad().numel(), 0);
  EXPECT_EQ(gamma.grad().to_floats(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(beta.grad().to_floats(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(table.grad().to_floats(), std::vector<float>(12, 0.0f));
}

TEST(OpsElementwise, BadArgumentsThrow) {
  Tensor a = Tensor::zeros({2, 3});
  Tensor ids = Tensor::zeros({2, 3}, DType::i32);
  EXPECT_THROW(ops::add(a, Tensor::zeros({3, 2})), Error);
  EXPECT_THROW(ops::add(a, ids), Error);
  EXPECT_THROW(ops::add(a, Tensor()), Error);
  EXPECT_THROW(ops::relu(ids), Error);
  EXPECT_THROW(ops::reshape(a, {4, 2}), Error);
  try {
    ops::add(a, Tensor::zeros({3, 2}));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: shapes differ"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tfm::internal
