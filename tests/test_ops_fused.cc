// The fused ops of the sub-layers: ops::linear_relu (the FFN's first product with oneDNN's relu
// post-op) and ops::add_dropout_layer_norm (the end of a post-norm sub-layer). Each against a
// double reference with finite differences, and against the unfused ops it replaces (forward and
// every gradient, with f32 and bf16 products for linear_relu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/kernels/cpu/dropout_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::Input;
using testing::random_f32_values;
using testing::Values;

Tensor tensor_of(const Shape& shape, const Values& v, bool requires_grad) {
  Tensor t = Tensor::from_floats(shape, testing::to_float_vector(v));
  t.set_requires_grad(requires_grad);
  return t;
}

// max(0, x W^T + b) in double for x [rows, in], W [out, in].
Values linear_relu_reference(const Values& x, const Values& w, const Values* bias, int64_t rows,
                             int64_t in, int64_t out) {
  Values y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = std::max(s, 0.0);
    }
  return y;
}

TEST(OpsLinearRelu, ForwardAndGradientsAgainstDoubleReference) {
  std::mt19937 rng(70);
  Input x{{2, 3, 5}, random_f32_values(30, rng)};
  Input w{{4, 5}, random_f32_values(20, rng)};
  Input b{{4}, random_f32_values(4, rng)};
  testing::check_op(
      {x, w, b},
      [](const std::vector<Tensor>& t) {
        Tensor y = ops::linear_relu(t[0], t[1], t[2]);
        EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
        return y;
      },
      [](const std::vector<Values>& v) {
        Values y = linear_relu_reference(v[0], v[1], &v[2], 6, 5, 4);
        // Some outputs must be cut by the relu and some kept, or half of the op goes untested.
        int zeros = static_cast<int>(std::count(y.begin(), y.end(), 0.0));
        EXPECT_TRUE(zeros > 0 && zeros < static_cast<int>(y.size()));
        return y;
      });
  testing::check_op(
      {x, w}, [](const std::vector<Tensor>& t) { return ops::linear_relu(t[0], t[1]); },
      [](const std::vector<Values>& v) {
        return linear_relu_reference(v[0], v[1], nullptr, 6, 5, 4);
      });
}

struct LinearReluRun {
  std::vector<float> y, dx, dw, db;
};

LinearReluRun run_linear_relu(bool fused, Tensor x, Tensor w, Tensor b, const Tensor& seed,
                              DType product) {
  for (Tensor* t : {&x, &w, &b}) t->zero_grad();
  Tape tape;
  Tensor y;
  {
    TapeScope scope(tape);
    y = fused ? ops::linear_relu(x, w, b, {product}) : ops::relu(ops::linear(x, w, b, {product}));
  }
  tape.backward(y, seed);
  return {y.to_floats(), x.grad().to_floats(), w.grad().to_floats(), b.grad().to_floats()};
}

TEST(OpsLinearRelu, EqualsReluOfLinearWithF32AndBf16Products) {
  // 370 rows by 90 outputs: above the parallel threshold of the relu kernels.
  const int64_t rows = 370, in = 70, out = 90;
  std::mt19937 rng(71);
  Tensor x = tensor_of({rows, in}, random_f32_values(rows * in, rng), true);
  Tensor w = tensor_of({out, in}, random_f32_values(out * in, rng), true);
  Tensor b = tensor_of({out}, random_f32_values(out, rng), true);
  Tensor seed = tensor_of({rows, out}, random_f32_values(rows * out, rng), false);
  for (DType product : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(product));
    LinearReluRun unfused = run_linear_relu(false, x, w, b, seed, product);
    LinearReluRun fused = run_linear_relu(true, x, w, b, seed, product);
    // One product with the relu applied to its output, and the same backward products on the same
    // masked gradient: the same numbers.
    EXPECT_EQ(fused.y, unfused.y);
    EXPECT_EQ(fused.dx, unfused.dx);
    EXPECT_EQ(fused.dw, unfused.dw);
    EXPECT_EQ(fused.db, unfused.db);
  }
}

TEST(GemmCpu, ReluPostOpAppliesLastAndIsPartOfThePrimitive) {
  std::mt19937 rng(72);
  Values a = random_f32_values(6 * 8, rng), b = random_f32_values(8 * 5, rng);
  Values c0 = random_f32_values(6 * 5, rng), bias = random_f32_values(5, rng);
  std::vector<float> fa = testing::to_float_vector(a), fb = testing::to_float_vector(b);
  std::vector<float> fbias = testing::to_float_vector(bias);
  // The same shapes with and without relu, with and without accumulation: a cache that ignored the
  // flag would hand one of them the other's primitive.
  for (bool accumulate : {false, true}) {
    for (bool relu : {false, true, false}) {
      std::vector<float> fc = testing::to_float_vector(c0);
      cpu::GemmArgs args;
      args.a = cpu::GemmOperand::dense(fa.data(), DType::f32, {6, 8});
      args.b = cpu::GemmOperand::dense(fb.data(), DType::f32, {8, 5});
      args.c = cpu::GemmOperand::dense(fc.data(), DType::f32, {6, 5});
      args.bias = fbias.data();
      args.accumulate = accumulate;
      args.relu = relu;
      cpu::gemm(args);
      Values expected(30);
      int negatives = 0;
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 5; ++j) {
          double s = bias[j];
          for (int p = 0; p < 8; ++p) s += a[i * 8 + p] * b[p * 5 + j];
          if (accumulate) s += c0[i * 5 + j];
          negatives += s < 0;
          expected[i * 5 + j] = relu ? std::max(s, 0.0) : s;
        }
      EXPECT_GT(negatives, 0);
      testing::expect_close(
          fc, expected, 1e-5, 1e-6,
          std::string(relu ? "relu(" : "(") + (accumulate ? "c + " : "") + "a b + bias)");
    }
  }
}

// layer_norm(x + dropout(branch)) in double, with the mask of ops::dropout for `seed`.
Values add_dropout_layer_norm_reference(const Values& x, const Values& branch, const Values& gamma,
                                        const Values& beta, double p, uint64_t seed, double eps) {
  const size_t d = gamma.size();
  Values s(x.size()), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    bool keep = cpu::dropout_keep(seed, i, static_cast<float>(p));
    s[i] = x[i] + (keep ? branch[i] / (1 - p) : 0.0);
  }
  for (size_t r = 0; r < x.size() / d; ++r) {
    const double* sr = s.data() + r * d;
    double mean = 0, var = 0;
    for (size_t j = 0; j < d; ++j) mean += sr[j];
    mean /= static_cast<double>(d);
    for (size_t j = 0; j < d; ++j) var += (sr[j] - mean) * (sr[j] - mean);
    var /= static_cast<double>(d);
    for (size_t j = 0; j < d; ++j)
      y[r * d + j] = (sr[j] - mean) / std::sqrt(var + eps) * gamma[j] + beta[j];
  }
  return y;
}

constexpr float kEps = 1e-5f;

// x and branch [3, 2, 9], gamma and beta [9]: the inputs of the sub-layer ends' reference checks.
std::vector<Input> sub_layer_end_inputs(std::mt19937& rng) {
  const Shape shape{3, 2, 9};
  return {{shape, random_f32_values(shape.numel(), rng, -2.0, 2.0)},
          {shape, random_f32_values(shape.numel(), rng, -2.0, 2.0)},
          {Shape{9}, random_f32_values(9, rng, 0.5, 1.5)},
          {Shape{9}, random_f32_values(9, rng, -1.0, 1.0)}};
}

TEST(OpsAddDropoutLayerNorm, ForwardAndGradientsAgainstDoubleReference) {
  std::mt19937 rng(73);
  const uint64_t seed = 1234;
  for (float p : {0.0f, 0.3f}) {
    SCOPED_TRACE(p);
    testing::check_op(
        sub_layer_end_inputs(rng),
        [&](const std::vector<Tensor>& t) {
          return ops::add_dropout_layer_norm(t[0], t[1], p, seed, t[2], t[3], kEps);
        },
        [&](const std::vector<Values>& v) {
          return add_dropout_layer_norm_reference(v[0], v[1], v[2], v[3], p, seed, kEps);
        });
  }
}

struct SublayerRun {
  std::vector<float> out, dx, dbranch, dgamma, dbeta;
};

// Which inputs of the sub-layer end are used again afterwards, so that the op's backward adds to
// gradients already written (it runs after the later uses' backward).
enum class ExtraUses { none, branch, branch_and_x };

// out = LN(x + drop(branch)), then z = out (+ branch) (+ x) as `extra` says.
SublayerRun run_sublayer_end(bool fused, Tensor x, Tensor branch, Tensor gamma, Tensor beta,
                             float p, uint64_t seed, const Tensor& upstream, ExtraUses extra) {
  for (Tensor* t : {&x, &branch, &gamma, &beta}) t->zero_grad();
  Tape tape;
  Tensor out, z;
  {
    TapeScope scope(tape);
    out = fused ? ops::add_dropout_layer_norm(x, branch, p, seed, gamma, beta, kEps)
                : ops::layer_norm(ops::add(x, p > 0 ? ops::dropout(branch, p, seed) : branch),
                                  gamma, beta, kEps);
    z = out;
    if (extra != ExtraUses::none) z = ops::add(z, branch);
    if (extra == ExtraUses::branch_and_x) z = ops::add(z, x);
  }
  tape.backward(z, upstream);
  return {out.to_floats(), x.grad().to_floats(), branch.grad().to_floats(),
          gamma.grad().to_floats(), beta.grad().to_floats()};
}

// Without a backward the op normalises each row of s where it wrote it (no buffer for s): the
// same bits as with one, on the calling thread (32 rows) and on several (100 rows).
TEST(OpsAddDropoutLayerNorm, WithoutABackwardTheSameBitsAsWithOne) {
  std::mt19937 rng(75);
  for (const Shape& shape : {Shape{32, 512}, Shape{4, 25, 512}}) {
    const auto xs = random_f32_values(shape.numel(), rng, -2.0, 2.0);
    const auto bs = random_f32_values(shape.numel(), rng, -2.0, 2.0);
    const auto gs = random_f32_values(512, rng, 0.5, 1.5), betas = random_f32_values(512, rng);
    for (float p : {0.0f, 0.1f}) {
      SCOPED_TRACE(::testing::Message() << shape.str() << ", p " << p);
      const Tensor plain = ops::add_dropout_layer_norm(
          tensor_of(shape, xs, false), tensor_of(shape, bs, false), p, 7,
          tensor_of({512}, gs, false), tensor_of({512}, betas, false), kEps);
      Tape tape;
      Tensor recorded;
      {
        TapeScope scope(tape);
        recorded = ops::add_dropout_layer_norm(
            tensor_of(shape, xs, true), tensor_of(shape, bs, true), p, 7,
            tensor_of({512}, gs, true), tensor_of({512}, betas, true), kEps);
      }
      EXPECT_EQ(plain.to_floats(), recorded.to_floats());
      EXPECT_NE(plain.to_floats(), tensor_of(shape, xs, false).to_floats());  // normalised
    }
  }
}

TEST(OpsAddDropoutLayerNorm, EqualsTheUnfusedOpsBitForBit) {
  // 100 rows of 512 (above the parallel threshold, with a partial backward chunk).
  const Shape shape{4, 25, 512};
  std::mt19937 rng(74);
  Tensor x = tensor_of(shape, random_f32_values(shape.numel(), rng, -2.0, 2.0), true);
  Tensor branch = tensor_of(shape, random_f32_values(shape.numel(), rng, -2.0, 2.0), true);
  Tensor gamma = tensor_of({512}, random_f32_values(512, rng, 0.5, 1.5), true);
  Tensor beta = tensor_of({512}, random_f32_values(512, rng), true);
  Tensor upstream = tensor_of(shape, random_f32_values(shape.numel(), rng), false);
  for (float p : {0.0f, 0.1f, 0.5f}) {
    for (ExtraUses extra : {ExtraUses::none, ExtraUses::branch, ExtraUses::branch_and_x}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << ", extra uses " << static_cast<int>(extra));
      SublayerRun unfused = run_sublayer_end(false, x, branch, gamma, beta, p, 99, upstream, extra);
      SublayerRun fused = run_sublayer_end(true, x, branch, gamma, beta, p, 99, upstream, extra);
      EXPECT_EQ(fused.out, unfused.out);
      EXPECT_EQ(fused.dx, unfused.dx);
      EXPECT_EQ(fused.dbranch, unfused.dbranch);
      EXPECT_EQ(fused.dgamma, unfused.dgamma);
      EXPECT_EQ(fused.dbeta, unfused.dbeta);
    }
  }
  // Another seed is another mask.
  SublayerRun a =
      run_sublayer_end(true, x, branch, gamma, beta, 0.1f, 99, upstream, ExtraUses::none);
  SublayerRun b =
      run_sublayer_end(true, x, branch, gamma, beta, 0.1f, 100, upstream, ExtraUses::none);
  EXPECT_NE(a.out, b.out);
}

TEST(OpsAddDropoutLayerNorm, GradientsOfSomeInputsOnly) {
  // A branch that needs no gradient (and fixed LayerNorm parameters): only x gets one.
  std::mt19937 rng(75);
  const Shape shape{5, 7};
  Values x = random_f32_values(35, rng), branch = random_f32_values(35, rng);
  Values gamma = random_f32_values(7, rng, 0.5, 1.5), beta = random_f32_values(7, rng);
  auto op = [](const std::vector<Tensor>& t) {
    return ops::add_dropout_layer_norm(t[0], t[1], 0.25f, 5, t[2], t[3], kEps);
  };
  auto reference = [](const std::vector<Values>& v) {
    return add_dropout_layer_norm_reference(v[0], v[1], v[2], v[3], 0.25, 5, kEps);
  };
  testing::check_op(
      {{shape, x}, {shape, branch, false}, {Shape{7}, gamma, false}, {Shape{7}, beta, false}}, op,
      reference);
  testing::check_op(
      {{shape, x, false}, {shape, branch}, {Shape{7}, gamma, false}, {Shape{7}, beta}}, op,
      reference);
}

// s + layer_norm(s) in double for s = x + dropout(branch): the pre-norm op's two outputs summed, so
// that one finite-difference check covers the gradients through both.
Values sum_plus_norm_reference(const Values& x, const Values& branch, const Values& gamma,
                               const Values& beta, double p, uint64_t seed, double eps) {
  Values y = add_dropout_layer_norm_reference(x, branch, gamma, beta, p, seed, eps);
  for (size_t i = 0; i < x.size(); ++i) {
    const bool keep = cpu::dropout_keep(seed, i, static_cast<float>(p));
    y[i] += x[i] + (keep ? branch[i] / (1 - p) : 0.0);
  }
  return y;
}

TEST(OpsAddDropoutThenLayerNorm, BothOutputsAndTheirGradientsAgainstDoubleReference) {
  std::mt19937 rng(76);
  const uint64_t seed = 4321;
  for (float p : {0.0f, 0.3f}) {
    SCOPED_TRACE(p);
    testing::check_op(
        sub_layer_end_inputs(rng),
        [&](const std::vector<Tensor>& t) {
          ops::SumAndNorm r =
              ops::add_dropout_then_layer_norm(t[0], t[1], p, seed, t[2], t[3], kEps);
          return ops::add(r.sum, r.normed);
        },
        [&](const std::vector<Values>& v) {
          return sum_plus_norm_reference(v[0], v[1], v[2], v[3], p, seed, kEps);
        });
  }
}

struct StreamRun {
  std::vector<float> out, dx, dbranch, dgamma, dbeta, dgamma2, dbeta2;
};

// A pre-norm stream of two steps and a final norm, as the encoder runs it:
//   s1 = x + drop(b0), y1 = LN1(s1), b1 = gelu(y1), s2 = s1 + drop(b1), out = LN2(s2)
// (`use_sum`: out + s2 instead, a stream that goes on), fused or with the unfused ops.
StreamRun run_stream(bool fused, const std::vector<Tensor>& leaves, float p, const Tensor& upstream,
                     bool use_sum) {
  const Tensor &x = leaves[0], &b0 = leaves[1], &g1 = leaves[2], &be1 = leaves[3], &g2 = leaves[4],
               &be2 = leaves[5];
  for (Tensor t : leaves) t.zero_grad();
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    auto step = [&](const Tensor& stream, const Tensor& branch, uint64_t seed, const Tensor& gamma,
                    const Tensor& beta) -> ops::SumAndNorm {
      if (fused)
        return ops::add_dropout_then_layer_norm(stream, branch, p, seed, gamma, beta, kEps);
      Tensor sum = ops::add(stream, p > 0 ? ops::dropout(branch, p, seed) : branch);
      return {sum, ops::layer_norm(sum, gamma, beta, kEps)};
    };
    ops::SumAndNorm first = step(x, b0, 31, g1, be1);
    ops::SumAndNorm second = step(first.sum, ops::gelu(first.normed), 32, g2, be2);
    out = use_sum ? ops::add(second.normed, second.sum) : second.normed;
  }
  tape.backward(out, upstream);
  return {out.to_floats(),       x.grad().to_floats(),   b0.grad().to_floats(),
          g1.grad().to_floats(), be1.grad().to_floats(), g2.grad().to_floats(),
          be2.grad().to_floats()};
}

TEST(OpsAddDropoutThenLayerNorm, AStreamEqualsTheUnfusedOpsBitForBit) {
  // 100 rows of 512 (above the parallel threshold, with a partial backward chunk).
  const Shape shape{4, 25, 512};
  std::mt19937 rng(77);
  std::vector<Tensor> leaves = {
      tensor_of(shape, random_f32_values(shape.numel(), rng, -2.0, 2.0), true),
      tensor_of(shape, random_f32_values(shape.numel(), rng, -2.0, 2.0), true),
      tensor_of({512}, random_f32_values(512, rng, 0.5, 1.5), true),
      tensor_of({512}, random_f32_values(512, rng), true),
      tensor_of({512}, random_f32_values(512, rng, 0.5, 1.5), true),
      tensor_of({512}, random_f32_values(512, rng), true)};
  Tensor upstream = tensor_of(shape, random_f32_values(shape.numel(), rng), false);
  for (float p : {0.0f, 0.1f, 0.5f}) {
    for (bool use_sum : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "p " << p << ", stream used after " << use_sum);
      StreamRun unfused = run_stream(false, leaves, p, upstream, use_sum);
      StreamRun fused = run_stream(true, leaves, p, upstream, use_sum);
      EXPECT_EQ(fused.out, unfused.out);
      EXPECT_EQ(fused.dx, unfused.dx);
      EXPECT_EQ(fused.dbranch, unfused.dbranch);
      EXPECT_EQ(fused.dgamma, unfused.dgamma);
      EXPECT_EQ(fused.dbeta, unfused.dbeta);
      EXPECT_EQ(fused.dgamma2, unfused.dgamma2);
      EXPECT_EQ(fused.dbeta2, unfused.dbeta2);
      // Not all zeros: every gradient was reached.
      for (const auto* g : {&fused.dx, &fused.dbranch, &fused.dgamma, &fused.dgamma2})
        EXPECT_GT(*std::max_element(g->begin(), g->end()), 0.0f);
    }
  }
}

TEST(OpsAddDropoutThenLayerNorm, OnlyTheSumUsedFurther) {
  // The norm's output unused: the gradients are the stream's alone, d(x) = g and d(branch) =
  // mask * g / (1 - p).
  const Shape shape{6, 16};
  std::mt19937 rng(78);
  Tensor x = tensor_of(shape, random_f32_values(shape.numel(), rng), true);
  Tensor branch = tensor_of(shape, random_f32_values(shape.numel(), rng), true);
  Tensor gamma = tensor_of({16}, random_f32_values(16, rng, 0.5, 1.5), true);
  Tensor beta = tensor_of({16}, random_f32_values(16, rng), true);
  Tensor upstream = tensor_of(shape, random_f32_values(shape.numel(), rng), false);
  Tape tape;
  ops::SumAndNorm r;
  {
    TapeScope scope(tape);
    r = ops::add_dropout_then_layer_norm(x, branch, 0.25f, 8, gamma, beta, kEps);
  }
  tape.backward(r.sum, upstream);
  const std::vector<float> g = upstream.to_floats(), dx = x.grad().to_floats();
  const std::vector<float> db = branch.grad().to_floats();
  EXPECT_EQ(dx, g);
  for (size_t i = 0; i < g.size(); ++i) {
    const bool keep = cpu::dropout_keep(8, i, 0.25f);
    EXPECT_FLOAT_EQ(db[i], keep ? g[i] / 0.75f : 0.0f) << i;
  }
  for (float v : gamma.grad().to_floats()) EXPECT_EQ(v, 0.0f);
}

TEST(OpsAddDropoutLayerNorm, BadArgumentsThrow) {
  Tensor x = Tensor::zeros({2, 4}), g = Tensor::full({4}, 1.0f), b = Tensor::zeros({4});
  EXPECT_NO_THROW(ops::add_dropout_layer_norm(x, x, 0.1f, 1, g, b, kEps));
  EXPECT_THROW(ops::add_dropout_layer_norm(x, Tensor::zeros({4, 2}), 0.1f, 1, g, b, kEps), Error);
  EXPECT_THROW(ops::add_dropout_layer_norm(x, x, 1.0f, 1, g, b, kEps), Error);
  EXPECT_THROW(ops::add_dropout_layer_norm(x, x, -0.1f, 1, g, b, kEps), Error);
  EXPECT_THROW(ops::add_dropout_layer_norm(x, x, 0.1f, 1, Tensor::zeros({3}), b, kEps), Error);
  EXPECT_THROW(ops::add_dropout_layer_norm(x, x, 0.1f, 1, g, b, 0.0f), Error);
  EXPECT_THROW(
      ops::add_dropout_layer_norm(x, Tensor::zeros({2, 4}, DType::i32), 0.1f, 1, g, b, kEps),
      Error);
}

}  // namespace
}  // namespace tfm::internal
