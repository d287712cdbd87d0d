// The feed-forward network with its hidden layer kept only in bf16 (ops::relu_feed_forward under
// bf16 products) and the kernels behind it: a product whose c is bf16 (cpu::gemm, and our vdpbf16ps
// kernel rounding in its tiles' stores) gives the bits of the same product into an f32 c converted
// with f32_to_bf16; the ReLU backward that masks with the bf16 hidden layer gives the bits of the
// one that masks with its f32 widening; and the op gives the bits of linear(linear_relu(...)), with
// one conversion fewer, on every device (the CPU, and a GPU when there is one: skipped, saying why,
// without; a GPU backend without the kernel runs the two ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gradcheck.h"
#include "temp_dir.h"
#include "tfm/autograd/tape.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using kernels::GemmArgs;
using kernels::GemmOperand;

std::vector<uint16_t> random_bf16(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (uint16_t& v : out) v = cpu::f32_to_bf16_bits(uniform(rng));
  return out;
}

// c = a b + bias, ReLU'd where `relu`, as cpu::gemm gives it into a bf16 c and into an f32 c then
// rounded; a [m, k] row-major or stored as its transpose, b [k, n] or stored as W [n, k].
void expect_rounded_product_is_product_then_rounded(int64_t m, int64_t n, int64_t k,
                                                    bool a_transposed, bool b_transposed, bool bias,
                                                    bool relu) {
  std::mt19937 rng(static_cast<uint32_t>(m * 131 + n * 7 + k));
  std::vector<uint16_t> a = random_bf16(m * k, rng), b = random_bf16(k * n, rng);
  a[0] = cpu::f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN());  // row 0 or column 0
  b[1] = cpu::f32_to_bf16_bits(3e38f);                                    // an overflow to inf
  std::vector<float> bias_values(static_cast<size_t>(n));
  for (float& v : bias_values) v = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
  GemmArgs args;
  args.a = a_transposed ? GemmOperand::dense(a.data(), DType::bf16, {k, m}).transposed()
                        : GemmOperand::dense(a.data(), DType::bf16, {m, k});
  args.b = b_transposed ? GemmOperand::dense(b.data(), DType::bf16, {n, k}).transposed()
                        : GemmOperand::dense(b.data(), DType::bf16, {k, n});
  args.bias = bias ? bias_values.data() : nullptr;
  args.relu = relu;
  std::vector<float> f32(static_cast<size_t>(m * n));
  args.c = GemmOperand::dense(f32.data(), DType::f32, {m, n});
  cpu::gemm(args);
  std::vector<uint16_t> want(f32.size()), got(f32.size(), 0xdead);
  cpu::f32_to_bf16(f32.data(), reinterpret_cast<bf16*>(want.data()), m * n);
  args.c = GemmOperand::dense(got.data(), DType::bf16, {m, n});
  cpu::gemm(args);
  const std::string what = std::to_string(m) + " x " + std::to_string(k) + " x " +
                           std::to_string(n) + (a_transposed ? ", a transposed" : "") +
                           (b_transposed ? ", b as W" : "") + (bias ? ", bias" : "") +
                           (relu ? ", relu" : "");
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(uint16_t)), 0) << what;
  int64_t nonzero = 0;
  for (float v : f32) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, m * n / 4) << what;  // not a product of zeros
}

// Through cpu::gemm: shapes our vdpbf16ps kernel takes (where the CPU has it and it is chosen),
// a sum deeper than its one depth block and small ones (then an f32 scratch and the rounding), in
// the forward's and the gradients' layouts.
TEST(FeedForwardBf16, ProductIntoBf16IsTheF32ProductRounded) {
  for (const bool relu : {true, false}) {
    expect_rounded_product_is_product_then_rounded(300, 270, 256, false, true, true, relu);
    expect_rounded_product_is_product_then_rounded(517, 1030, 131, false, true, true, relu);
    expect_rounded_product_is_product_then_rounded(300, 270, 700, false, true, true, relu);
    expect_rounded_product_is_product_then_rounded(9, 20, 5, false, false, false, relu);
  }
  expect_rounded_product_is_product_then_rounded(260, 300, 512, true, false, false, false);
  expect_rounded_product_is_product_then_rounded(260, 300, 256, false, false, true, true);
}

// The kernel itself where this build has it, on tiles cut by the edges (rows not a multiple of 14,
// columns not of 32), and its refusal of a sum deeper than one block.
TEST(FeedForwardBf16, BlockedKernelRoundsInItsStores) {
  if (!cpu::blocked_gemm_bf16_available())
    GTEST_SKIP() << "this build has no AVX512-BF16 kernel (a CPU without AVX512-BF16)";
  const int64_t m = 61, n = 75, k = 99;
  std::mt19937 rng(3);
  std::vector<uint16_t> a = random_bf16(m * k, rng), b = random_bf16(n * k, rng);
  // Row 0 NaN; the last row of a zero, so that c's last row is the bias: 1 + (j % 4) 2^-8, two of
  // every four of them ties between two bf16 (1 + 2^-8 rounds down to 1, even; 1 + 3 2^-8 up to
  // 1 + 2^-6).
  a[0] = cpu::f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN());
  std::fill(a.end() - k, a.end(), uint16_t{0});
  std::vector<float> bias(static_cast<size_t>(n)), f32(static_cast<size_t>(m * n));
  for (int64_t j = 0; j < n; ++j) bias[j] = 1.0f + static_cast<float>(j % 4) / 256.0f;
  const uint16_t ties[4] = {0x3f80, 0x3f80, 0x3f81, 0x3f82};
  const cpu::StridedBf16Matrix a_view{reinterpret_cast<const bf16*>(a.data()), k, 1};
  const cpu::StridedBf16Matrix b_view{reinterpret_cast<const bf16*>(b.data()), 1, k};  // W^T
  for (const bool relu : {false, true}) {
    cpu::blocked_gemm_bf16(m, n, k, a_view, b_view, bias.data(), false, relu, f32.data(), n);
    std::vector<uint16_t> want(f32.size()), got(f32.size(), 0xdead);
    cpu::f32_to_bf16(f32.data(), reinterpret_cast<bf16*>(want.data()), m * n);
    cpu::blocked_gemm_bf16_rounded(m, n, k, a_view, b_view, bias.data(), relu,
                                   reinterpret_cast<bf16*>(got.data()), n);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(uint16_t)), 0)
        << (relu ? "with" : "without") << " relu";
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(got[(m - 1) * n + j], ties[j % 4]) << "the bias alone, column " << j;
      EXPECT_EQ(got[j] & 0x7fc0, 0x7fc0) << "row 0 a quiet NaN, column " << j;
    }
  }
  const int64_t deep = cpu::blocked_gemm_bf16_rounded_most_depth() + 1;
  std::vector<uint16_t> a_deep(static_cast<size_t>(deep)), b_deep(static_cast<size_t>(deep)), c(1);
  testing::expect_error(
      [&] {
        cpu::blocked_gemm_bf16_rounded(1, 1, deep,
                                       {reinterpret_cast<bf16*>(a_deep.data()), deep, 1},
                                       {reinterpret_cast<bf16*>(b_deep.data()), 1, 1}, nullptr,
                                       false, reinterpret_cast<bf16*>(c.data()), 1);
      },
      {"blocked_gemm_bf16_rounded", "one depth block"});
}

// relu_backward_bias_from_bf16 against relu_backward_bias_bf16 on the widened copy: the same bits
// for the gradient's copy and the bias's gradient (written, added to, absent), with zeros, a
// negative zero, a NaN and an infinity in y.
TEST(FeedForwardBf16, ReluBackwardFromBf16IsReluBackwardOnTheWidenedCopy) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{517, 1030}, {3, 5}, {64, 1024}};
  for (const auto& [rows, cols] : shapes) {
    const int64_t n = rows * cols;
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::vector<uint16_t> y = random_bf16(n, rng);
    std::vector<float> g(static_cast<size_t>(n)), y_wide(static_cast<size_t>(n));
    for (float& v : g) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
    y[0] = 0x0000;  // +0
    y[1] = 0x8000;  // -0
    y[2] = 0x7fc0;  // NaN
    y[3] = 0x7f80;  // +inf
    y[4] = 0x0001;  // the smallest positive subnormal
    for (int64_t i = 0; i < n; ++i) y_wide[i] = std::bit_cast<float>(uint32_t{y[i]} << 16);
    std::vector<float> start(static_cast<size_t>(cols), 0.5f);
    for (const bool with_bias : {false, true}) {
      for (const bool accumulate : {false, true}) {
        std::vector<uint16_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), 0xdead);
        std::vector<float> want_db = start, got_db = start;
        cpu::relu_backward_bias_bf16(y_wide.data(), g.data(), rows, cols,
                                     reinterpret_cast<bf16*>(want.data()),
                                     with_bias ? want_db.data() : nullptr, accumulate);
        cpu::relu_backward_bias_from_bf16(reinterpret_cast<const bf16*>(y.data()), g.data(), rows,
                                          cols, reinterpret_cast<bf16*>(got.data()),
                                          with_bias ? got_db.data() : nullptr, accumulate);
        const std::string what = std::to_string(rows) + " x " + std::to_string(cols) +
                                 (with_bias ? ", bias" : "") + (accumulate ? ", added" : "");
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(uint16_t)), 0) << what;
        EXPECT_EQ(std::memcmp(got_db.data(), want_db.data(), cols * sizeof(float)), 0) << what;
        EXPECT_EQ(got[4], cpu::f32_to_bf16_bits(g[4])) << what;  // a subnormal y > 0 passes g
        EXPECT_EQ(got[2] & 0x7fff, 0) << what;                   // a NaN y does not
      }
    }
  }
}

// ReLU's backward through the product that makes its gradient (cpu::relu_backward_product_bf16)
// against that product into an f32 c and relu_backward_bias_from_bf16: the same bits for the
// masked gradient's copy and the bias's gradient (written, added to, absent), on shapes our kernel
// takes (tiles cut by the edges, columns split between the threads) and ones it does not.
TEST(FeedForwardBf16, ReluBackwardProductIsTheProductThenTheMask) {
  struct Case {
    int64_t m, n, k;
  };
  for (const Case shape :
       {Case{300, 1030, 256}, Case{517, 272, 131}, Case{40, 50, 24}, Case{300, 270, 700}}) {
    const int64_t m = shape.m, n = shape.n, k = shape.k;
    std::mt19937 rng(static_cast<uint32_t>(m + n + k));
    const std::vector<uint16_t> g = random_bf16(m * k, rng), w = random_bf16(n * k, rng);
    std::vector<uint16_t> mask = random_bf16(m * n, rng);
    mask[0] = 0x7fc0;  // NaN
    mask[1] = 0x8000;  // -0
    mask[2] = 0x0001;  // a subnormal > 0
    mask[3] = 0x7f80;  // +inf
    GemmArgs args;
    args.a = GemmOperand::dense(g.data(), DType::bf16, {m, k});
    args.b = GemmOperand::dense(w.data(), DType::bf16, {n, k}).transposed();
    std::vector<float> product(static_cast<size_t>(m * n));
    GemmArgs f32 = args;
    f32.c = GemmOperand::dense(product.data(), DType::f32, {m, n});
    cpu::gemm(f32);
    const std::vector<float> start(static_cast<size_t>(n), 0.75f);
    for (const bool with_bias : {false, true}) {
      for (const bool accumulate : {false, true}) {
        std::vector<uint16_t> want(product.size()), got(product.size(), 0xdead);
        std::vector<float> want_db = start, got_db = start;
        cpu::relu_backward_bias_from_bf16(
            reinterpret_cast<const bf16*>(mask.data()), product.data(), m, n,
            reinterpret_cast<bf16*>(want.data()), with_bias ? want_db.data() : nullptr, accumulate);
        GemmArgs rounded = args;
        rounded.c = GemmOperand::dense(got.data(), DType::bf16, {m, n});
        cpu::relu_backward_product_bf16(rounded, reinterpret_cast<const bf16*>(mask.data()),
                                        with_bias ? got_db.data() : nullptr, accumulate);
        const std::string what = std::to_string(m) + " x " + std::to_string(k) + " x " +
                                 std::to_string(n) + (with_bias ? ", bias" : "") +
                                 (accumulate ? ", added" : "");
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(uint16_t)), 0) << what;
        EXPECT_EQ(std::memcmp(got_db.data(), want_db.data(), n * sizeof(float)), 0) << what;
        EXPECT_EQ(got[0], 0) << what;
        EXPECT_EQ(got[1], 0) << what;
        EXPECT_EQ(got[2], cpu::f32_to_bf16_bits(product[2])) << what;
        int64_t nonzero = 0;
        for (uint16_t v : got) nonzero += (v & 0x7fff) != 0;
        EXPECT_GT(nonzero, m * n / 4) << what;
      }
    }
  }
}

class FeedForwardBf16Op : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    const std::string why = ops::device_unavailable_reason(GetParam());
    if (!why.empty()) GTEST_SKIP() << "needs a " << device_name(GetParam()) << " device: " << why;
    ops::use_device(GetParam());
  }
  Device device() const { return GetParam(); }
};

std::string device_label(const ::testing::TestParamInfo<Device>& param) {
  return std::string(device_name(param.param));
}

INSTANTIATE_TEST_SUITE_P(Devices, FeedForwardBf16Op, ::testing::Values(Device::cpu, Device::cuda),
                         device_label);

struct FeedForwardInputs {
  Tensor x, w1, b1, w2, b2, seed;
};

FeedForwardInputs feed_forward_inputs(Device device, const Shape& x_shape, int64_t d_ff,
                                      int64_t out) {
  std::mt19937 rng(11);
  auto make = [&](const Shape& shape) {
    const testing::Values v = testing::random_values(shape.numel(), rng);
    Tensor t = Tensor::from_floats(shape, std::vector<float>(v.begin(), v.end())).to(device);
    t.set_requires_grad(true);
    return t;
  };
  const int64_t d_model = x_shape[x_shape.rank() - 1];
  FeedForwardInputs in{make(x_shape),     make({d_ff, d_model}), make({d_ff}),
                       make({out, d_ff}), make({out}),           Tensor{}};
  Shape out_shape = x_shape;
  out_shape[-1] = out;
  in.seed = make(out_shape);
  return in;
}

// The output and every input's gradient of `op` on a tape, seeded with in.seed, and how many
// conversions to bf16 ran.
std::vector<Tensor> run(FeedForwardInputs in, int64_t& conversions,
                        const std::function<Tensor(const FeedForwardInputs&)>& op) {
  for (Tensor* t : {&in.x, &in.w1, &in.b1, &in.w2, &in.b2}) t->zero_grad();
  const auto start = ops::bf16_conversions();
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    out = op(in);
  }
  tape.backward(out, in.seed);
  conversions = ops::bf16_conversions().calls - start.calls;
  return {out, in.x.grad(), in.w1.grad(), in.b1.grad(), in.w2.grad(), in.b2.grad()};
}

TEST_P(FeedForwardBf16Op, HiddenLayerInBf16GivesTheBitsOfLinearReluThenLinear) {
  const bool fused =
      ops::detail::kernels_for("test", device()).relu_backward_product_bf16 != nullptr;
  // A [2, 150, 128] batch: products our CPU kernels take (every dim at least 128); a small one.
  for (const Shape shape : {Shape{2, 150, 128}, Shape{7, 5}}) {
    const FeedForwardInputs in = feed_forward_inputs(device(), shape, 272, shape[-1]);
    int64_t composed_conversions = 0, fused_conversions = 0;
    const std::vector<Tensor> want = run(in, composed_conversions, [](const FeedForwardInputs& i) {
      return ops::linear(ops::linear_relu(i.x, i.w1, i.b1, {DType::bf16}), i.w2, i.b2,
                         {DType::bf16});
    });
    const std::vector<Tensor> got = run(in, fused_conversions, [](const FeedForwardInputs& i) {
      return ops::relu_feed_forward(i.x, i.w1, i.b1, i.w2, i.b2, DType::bf16);
    });
    // x, both weights and the output's gradient; the two ops also round the hidden layer.
    EXPECT_EQ(composed_conversions, 5);
    EXPECT_EQ(fused_conversions, fused ? 4 : 5);
    const char* names[] = {"output", "dx", "dw1", "db1", "dw2", "db2"};
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor a = got[i].to(Device::cpu), b = want[i].to(Device::cpu);
      ASSERT_EQ(a.shape(), b.shape()) << names[i];
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << names[i] << ", " << shape.str();
      const float* values = a.data<float>();
      int64_t nonzero = 0;
      for (int64_t j = 0; j < a.numel(); ++j) nonzero += values[j] != 0.0f;
      EXPECT_GT(nonzero, a.numel() / 4) << names[i];  // not zeros on both sides
    }
  }
  // f32 products are the two ops.
  const FeedForwardInputs in = feed_forward_inputs(device(), {4, 6}, 10, 6);
  int64_t conversions = 0;
  const std::vector<Tensor> f32 = run(in, conversions, [](const FeedForwardInputs& i) {
    return ops::relu_feed_forward(i.x, i.w1, i.b1, i.w2, i.b2, DType::f32);
  });
  const std::vector<Tensor> f32_want = run(in, conversions, [](const FeedForwardInputs& i) {
    return ops::linear(ops::linear_relu(i.x, i.w1, i.b1), i.w2, i.b2);
  });
  EXPECT_EQ(conversions, 0);
  for (size_t i = 0; i < f32.size(); ++i) {
    const Tensor a = f32[i].to(Device::cpu), b = f32_want[i].to(Device::cpu);
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << "f32, output or gradient " << i;
  }
}

TEST_P(FeedForwardBf16Op, RefusesWeightsThatDoNotChain) {
  const FeedForwardInputs in = feed_forward_inputs(device(), {4, 6}, 10, 6);
  const Tensor w2_wrong = Tensor::zeros({6, 9}).to(device());
  testing::expect_error(
      [&] { ops::relu_feed_forward(in.x, in.w1, in.b1, w2_wrong, in.b2, DType::bf16); },
      {"relu_feed_forward", "does not take fc1's 10 outputs"});
  const Tensor x_wrong = Tensor::zeros({4, 7}).to(device());
  testing::expect_error(
      [&] { ops::relu_feed_forward(x_wrong, in.w1, in.b1, in.w2, in.b2, DType::bf16); },
      {"relu_feed_forward", "does not fit weight"});
}

}  // namespace
}  // namespace tfm::internal
