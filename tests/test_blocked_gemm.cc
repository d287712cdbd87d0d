// The blocked kernels for training's large products (kernels/cpu/blocked_gemm_cpu.h), f32 and
// bf16 operands: every element within the f32 rounding bound of the exact sum in each layout of a
// and b, on shapes off their tiles and blocks (odd depths for bf16's pairs), with bias,
// accumulation and ReLU; a NaN stays a NaN through ReLU; the numbers do not depend on the threads;
// and cpu::gemm takes a kernel for large products (the same bits as calling it) and oneDNN's matmul
// when it is turned off (the same values within the bound). The vdpbf16ps kernel's tests run where
// the build has it (a CPU with AVX512-BF16); the kernel that widens bf16 to f32 for the FMA gives
// the f32 kernel's bits.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "gradcheck.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/ops/autocast.h"

namespace tfm::internal {
namespace {

using testing::random_values;

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  const auto v = random_values(n, rng, -1.0, 1.0);
  return std::vector<float>(v.begin(), v.end());
}

std::vector<bf16> to_bf16(std::vector<float>& values) {
  std::vector<bf16> rounded;
  for (float& v : values) {
    rounded.push_back(float_to_bf16(v));
    v = bf16_to_float(rounded.back());  // the exact sum is then the bf16 operands'
  }
  return rounded;
}

// One product's operands: a [m, k] stored row-major or as its transpose [k, m], b [k, n] stored
// row-major or as [n, k] (the forward's W), c's old values for accumulation; with bf16 operands,
// a and b rounded to bf16 (a16, b16; a and b then hold their exact values).
struct Product {
  int64_t m, n, k;
  bool a_transposed, b_transposed, bias, accumulate, relu, bf16_operands;
  // With bf16 operands, which of our kernels run_kernel calls: the vdpbf16ps one or the widening.
  bool widened = false;
  std::vector<float> a, b, bias_values, c_old;
  std::vector<bf16> a16, b16;

  Product(int64_t m_, int64_t n_, int64_t k_, bool at, bool bt, bool with_bias, bool acc, bool r,
          std::mt19937& rng, bool bf16_ops = false)
      : m(m_),
        n(n_),
        k(k_),
        a_transposed(at),
        b_transposed(bt),
        bias(with_bias),
        accumulate(acc),
        relu(r),
        bf16_operands(bf16_ops),
        a(random_floats(m * k, rng)),
        b(random_floats(k * n, rng)),
        bias_values(random_floats(n, rng)),
        c_old(random_floats(m * n, rng)) {
    if (bf16_operands) a16 = to_bf16(a), b16 = to_bf16(b);
  }

  cpu::StridedMatrix a_view() const {
    return a_transposed ? cpu::StridedMatrix{a.data(), 1, m} : cpu::StridedMatrix{a.data(), k, 1};
  }
  cpu::StridedMatrix b_view() const {
    return b_transposed ? cpu::StridedMatrix{b.data(), 1, k} : cpu::StridedMatrix{b.data(), n, 1};
  }
  double a_at(int64_t i, int64_t t) const {
    const auto v = a_view();
    return v.data[i * v.row_stride + t * v.col_stride];
  }
  double b_at(int64_t t, int64_t j) const {
    const auto v = b_view();
    return v.data[t * v.row_stride + j * v.col_stride];
  }

  std::vector<float> run_kernel() const {
    std::vector<float> c = accumulate ? c_old : std::vector<float>(static_cast<size_t>(m * n), NAN);
    const float* bias_data = bias ? bias_values.data() : nullptr;
    if (bf16_operands) {
      const auto av = a_view(), bv = b_view();
      auto kernel = widened ? cpu::blocked_gemm_bf16_widened : cpu::blocked_gemm_bf16;
      kernel(m, n, k, {a16.data(), av.row_stride, av.col_stride},
             {b16.data(), bv.row_stride, bv.col_stride}, bias_data, accumulate, relu, c.data(), n);
    } else {
      cpu::blocked_gemm_f32(m, n, k, a_view(), b_view(), bias_data, accumulate, relu, c.data(), n);
    }
    return c;
  }

  std::vector<float> run_gemm() const {
    std::vector<float> c = accumulate ? c_old : std::vector<float>(static_cast<size_t>(m * n), NAN);
    cpu::GemmArgs args;
    const DType type = bf16_operands ? DType::bf16 : DType::f32;
    const void* a_data = bf16_operands ? static_cast<const void*>(a16.data()) : a.data();
    const void* b_data = bf16_operands ? static_cast<const void*>(b16.data()) : b.data();
    args.a = a_transposed ? cpu::GemmOperand::dense(a_data, type, {k, m}).transposed()
                          : cpu::GemmOperand::dense(a_data, type, {m, k});
    args.b = b_transposed ? cpu::GemmOperand::dense(b_data, type, {n, k}).transposed()
                          : cpu::GemmOperand::dense(b_data, type, {k, n});
    args.c = cpu::GemmOperand::dense(c.data(), DType::f32, {m, n});
    args.bias = bias ? bias_values.data() : nullptr;
    args.accumulate = accumulate;
    args.relu = relu;
    cpu::gemm(args);
    return c;
  }

  // Each element against the exact sum in double, within (k + 3) u (sum |a b| + |bias| + |c_old|):
  // recursive f32 summation of the k products and the two additions. (vdpbf16ps adds its two
  // products one after the other, each rounded, and a product of two bf16 is exact in f32: the
  // same bound.)
  // Every `row_step`-th row (a large product's check would take long in double).
  void expect_within_bound(const std::vector<float>& c, int64_t row_step = 1) const {
    const double u = std::ldexp(1.0, -24);
    for (int64_t i = 0; i < m; i += row_step)
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t t = 0; t < k; ++t) {
          exact += a_at(i, t) * b_at(t, j);
          magnitude += std::abs(a_at(i, t) * b_at(t, j));
        }
        const size_t at = static_cast<size_t>(i * n + j);
        if (bias) exact += bias_values[static_cast<size_t>(j)];
        if (accumulate) exact += c_old[at];
        magnitude += (bias ? std::abs(bias_values[static_cast<size_t>(j)]) : 0) +
                     (accumulate ? std::abs(c_old[at]) : 0);
        const double bound = static_cast<double>(k + 3) * u * magnitude;
        const double expected = relu ? std::max(0.0, exact) : exact;
        ASSERT_NEAR(c[at], expected, bound) << "element (" << i << ", " << j << ")";
      }
  }
};

// The product in each of the four layouts of a and b, with bias, accumulation and ReLU in turn.
void expect_every_layout_within_bound(int64_t m, int64_t n, int64_t k, std::mt19937& rng,
                                      bool bf16_operands, bool widened = false) {
  for (int layout = 0; layout < 4; ++layout) {
    const bool at = layout & 1, bt = layout & 2;
    const bool bias = (m + layout) % 2 == 0, acc = layout == 1 || layout == 2, relu = layout >= 2;
    SCOPED_TRACE(fmt::format("m {} n {} k {} a^T {} b^T {} bias {} acc {} relu {}", m, n, k, at, bt,
                             bias, acc, relu));
    Product p(m, n, k, at, bt, bias, acc, relu, rng, bf16_operands);
    p.widened = widened;
    p.expect_within_bound(p.run_kernel());
  }
}

// The same bits on all threads, on one, and on one inside a parallel region; within the bound.
void expect_the_same_bits_whatever_the_threads(const Product& p) {
  const auto all_threads = p.run_kernel();
  std::vector<float> inside;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    inside = p.run_kernel();
  }
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one_thread = p.run_kernel();
  omp_set_num_threads(threads);
  EXPECT_EQ(all_threads, one_thread);
  EXPECT_EQ(all_threads, inside);
  p.expect_within_bound(all_threads);
}

TEST(BlockedGemm, EveryElementWithinTheRoundingBoundInEveryLayout) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(3);
  struct Case {
    int64_t m, n, k;
  };
  // Off the 14 x 32 tile and the 16-deep transposes; past one block of depth (256: k 400), of a's
  // rows (336: m 337) and of b's columns (512: n 1030); a single row, column and depth.
  for (const Case& s : {Case{1, 1, 1}, Case{14, 32, 16}, Case{15, 33, 17}, Case{13, 31, 193},
                        Case{337, 70, 40}, Case{29, 1030, 21}, Case{100, 100, 400}}) {
    expect_every_layout_within_bound(s.m, s.n, s.k, rng, false);
  }
}

TEST(BlockedGemm, ReluKeepsANan) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(4);
  Product p(20, 40, 30, false, true, true, false, true, rng);
  p.a[5 * 30 + 7] = std::numeric_limits<float>::quiet_NaN();  // row 5
  const auto c = p.run_kernel();
  for (int64_t j = 0; j < 40; ++j) EXPECT_TRUE(std::isnan(c[static_cast<size_t>(5 * 40 + j)]));
  EXPECT_FALSE(std::isnan(c[0]));
  EXPECT_GT(std::count(c.begin(), c.end(), 0.0f), 0);  // ReLU did cut the negative sums
}

TEST(BlockedGemm, TheSameBitsOnOneThreadInsideARegionAndOnAll) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(5);
  expect_the_same_bits_whatever_the_threads(
      Product(300, 520, 450, true, false, true, true, false, rng));
}

TEST(BlockedGemm, GemmTakesItForLargeProductsAndOneDnnWhenTurnedOff) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(6);
  const int64_t m = 1100, n = 1000, k = 1000;  // just over 2^30 multiply-adds
  ASSERT_TRUE(cpu::blocked_gemm_applies(m, n, k));
  EXPECT_FALSE(cpu::blocked_gemm_applies(2048, 256, 256));   // in cache: oneDNN was faster
  EXPECT_FALSE(cpu::blocked_gemm_applies(8, 1 << 20, 512));  // decoding's few rows stay elsewhere
  for (int layout = 0; layout < 3; ++layout) {
    SCOPED_TRACE(fmt::format("layout {}", layout));
    const Product p(m, n, k, layout == 2, layout == 0, layout == 0, layout == 2, layout == 1, rng);
    const auto via_gemm = p.run_gemm();
    EXPECT_EQ(via_gemm, p.run_kernel());
    cpu::set_blocked_gemm_enabled(false);
    EXPECT_FALSE(cpu::blocked_gemm_applies(m, n, k));
    const auto onednn = p.run_gemm();
    cpu::set_blocked_gemm_enabled(true);
    EXPECT_NE(onednn, via_gemm);  // another order of summation: a few last bits differ
    p.expect_within_bound(onednn, 97);
    p.expect_within_bound(via_gemm, 97);
  }
}

// Each of our bf16 kernels (the vdpbf16ps one, or the widening one) off the 14 x 32 tile, at odd
// depths (a last pair with one bf16) and depths off the 32-deep transposes; past one block of depth
// (512: k 600), of a's rows (336: m 337) and of b's columns (512: n 1030); a single row, column and
// depth.
void expect_bf16_shapes_within_bound(std::mt19937& rng, bool widened) {
  struct Case {
    int64_t m, n, k;
  };
  for (const Case& s :
       {Case{1, 1, 1}, Case{14, 32, 32}, Case{15, 33, 17}, Case{13, 31, 193}, Case{337, 70, 41},
        Case{29, 1030, 22}, Case{100, 100, 600}, Case{40, 50, 1025}}) {
    expect_every_layout_within_bound(s.m, s.n, s.k, rng, true, widened);
  }
}

// A NaN in row 5 of a reaches every element of that row through ReLU and no other, ReLU zeroes some
// elements; and the numbers do not depend on the threads.
void expect_bf16_relu_keeps_a_nan_and_threads_agree(std::mt19937& rng, bool widened) {
  Product nan(20, 40, 31, false, true, true, false, true, rng, true);
  nan.widened = widened;
  nan.a16[5 * 31 + 7] = float_to_bf16(std::numeric_limits<float>::quiet_NaN());  // row 5
  const auto with_nan = nan.run_kernel();
  for (int64_t j = 0; j < 40; ++j)
    EXPECT_TRUE(std::isnan(with_nan[static_cast<size_t>(5 * 40 + j)]));
  EXPECT_FALSE(std::isnan(with_nan[0]));
  EXPECT_GT(std::count(with_nan.begin(), with_nan.end(), 0.0f), 0);

  Product p(300, 520, 451, true, false, true, true, false, rng, true);
  p.widened = widened;
  expect_the_same_bits_whatever_the_threads(p);
}

TEST(BlockedGemmBf16, EveryElementWithinTheRoundingBoundInEveryLayout) {
  if (!cpu::blocked_gemm_bf16_available())
    GTEST_SKIP() << "this build has no AVX512-BF16 (no bf16 kernel)";
  std::mt19937 rng(13);
  expect_bf16_shapes_within_bound(rng, false);
}

TEST(BlockedGemmBf16, ReluKeepsANanAndThreadsGiveTheSameBits) {
  if (!cpu::blocked_gemm_bf16_available())
    GTEST_SKIP() << "this build has no AVX512-BF16 (no bf16 kernel)";
  std::mt19937 rng(14);
  expect_bf16_relu_keeps_a_nan_and_threads_agree(rng, false);
}

// The widening kernel on the same shapes as the vdpbf16ps one (odd depths, every block's edge).
TEST(BlockedGemmBf16Widened, EveryElementWithinTheRoundingBoundInEveryLayout) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(17);
  expect_bf16_shapes_within_bound(rng, true);
}

// Widened bf16 operands are the f32 kernel's operands: the same packed panels and order of
// summation, so the same bits as blocked_gemm_f32 on the bf16 values as floats.
TEST(BlockedGemmBf16Widened, TheSameBitsAsTheF32KernelOnTheSameValues) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(18);
  for (int layout = 0; layout < 4; ++layout) {
    SCOPED_TRACE(fmt::format("layout {}", layout));
    Product p(301, 530, 515, layout & 1, layout & 2, layout == 0, layout == 1, layout == 3, rng,
              true);
    p.widened = true;
    const auto widened = p.run_kernel();
    p.bf16_operands = false;  // a and b hold the bf16 values exactly
    EXPECT_EQ(widened, p.run_kernel());
  }
}

TEST(BlockedGemmBf16Widened, ReluKeepsANanAndThreadsGiveTheSameBits) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no AVX-512 (no kernel)";
  std::mt19937 rng(19);
  expect_bf16_relu_keeps_a_nan_and_threads_agree(rng, true);
}

// The measured ratio of vdpbf16ps's multiply-adds to the FMA's: two per instruction against one,
// at half the FMA's rate on an Intel Xeon without AMX, at its rate on AMD Zen 4 (two per cycle), or
// at its rate, so within [0.25, 4] on any CPU; 0 without AVX512-BF16 in the build.
TEST(BlockedGemmBf16, TheMeasuredDotToFmaRateIsAPlausibleRatio) {
  const double rate = cpu::vdpbf16ps_to_fma_rate();
  if (!cpu::blocked_gemm_bf16_available()) {
    EXPECT_EQ(rate, 0.0);
    return;
  }
  EXPECT_GE(rate, 0.25);
  EXPECT_LE(rate, 4.0);
  EXPECT_EQ(rate, cpu::vdpbf16ps_to_fma_rate());  // measured once
}

// The default choice: oneDNN where it has AMX or where this build has no AVX512-BF16; the widening
// kernel where vdpbf16ps does no more multiply-adds a second than the FMA; the vdpbf16ps kernel
// where it does more (unless the environment chose).
TEST(BlockedGemmBf16, TheDefaultChoiceFollowsTheMeasuredRates) {
  if (std::getenv("TFM_CPU_GEMM_BF16") || std::getenv("TFM_CPU_GEMM"))
    GTEST_SKIP() << "the environment chooses (TFM_CPU_GEMM_BF16 or TFM_CPU_GEMM is set)";
  const double rate = cpu::vdpbf16ps_to_fma_rate();
  auto expected = cpu::Bf16Products::onednn;
  if (!cpu::onednn_uses_amx() && rate > 0)
    expected = rate <= 1 ? cpu::Bf16Products::widened : cpu::Bf16Products::dot;
  EXPECT_EQ(cpu::bf16_products(), expected)
      << "rate " << rate << ", chosen " << cpu::bf16_products_name(cpu::bf16_products());
}

// A choice in the environment: a valid value is taken, another one ignored with a line naming it.
TEST(BlockedGemm, AnEnvironmentChoiceOutsideTheValidOnesIsIgnoredAndSaidSo) {
  ASSERT_EQ(setenv("TFM_TEST_GEMM_CHOICE", "widened", 1), 0);
  EXPECT_STREQ(cpu::environment_choice("TFM_TEST_GEMM_CHOICE", {"onednn", "widened"}), "widened");
  ASSERT_EQ(setenv("TFM_TEST_GEMM_CHOICE", "widend", 1), 0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cpu::environment_choice("TFM_TEST_GEMM_CHOICE", {"onednn", "widened"}), nullptr);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "tfm: TFM_TEST_GEMM_CHOICE=widend is not one of onednn, widened; ignored\n");
  unsetenv("TFM_TEST_GEMM_CHOICE");
  EXPECT_EQ(cpu::environment_choice("TFM_TEST_GEMM_CHOICE", {"onednn"}), nullptr);
}

// The training log's products (ops::describe_products): bf16 on the CPU says when it is widened,
// and with this CPU's measured rate; f32, or bf16 on another device, adds nothing.
TEST(BlockedGemmBf16, TheLogSaysWhenBf16ProductsAreWidened) {
  EXPECT_EQ(ops::describe_products(DType::f32, Device::cpu), "");
  EXPECT_EQ(ops::describe_products(DType::bf16, Device::cuda), "");
  const cpu::Bf16Products chosen = cpu::bf16_products();
  cpu::set_bf16_products(cpu::Bf16Products::widened);
  if (cpu::bf16_products_widened()) {
    EXPECT_EQ(ops::describe_products(DType::bf16, Device::cpu),
              fmt::format(" (widened to f32: this CPU's vdpbf16ps does {:.2f}x the multiply-adds "
                          "of its FMA)",
                          cpu::vdpbf16ps_to_fma_rate()));
  }
  cpu::set_bf16_products(cpu::Bf16Products::onednn);
  EXPECT_EQ(
      ops::describe_products(DType::bf16, Device::cpu),
      cpu::onednn_multiplies_bf16() ? "" : " (widened to f32: this CPU has no bf16 products)");
  cpu::set_bf16_products(chosen);
}

// cpu::gemm with bf16 operands and an f32 result, each of our kernels chosen in turn: its bits
// where it applies (oneDNN without AMX), oneDNN's products within the same bound otherwise, when
// turned off, or when oneDNN is chosen.
TEST(BlockedGemmBf16, GemmTakesTheChosenKernelAndOneDnnOtherwise) {
  std::mt19937 rng(16);
  const int64_t m = 1100, n = 1000, k = 1000;
  const cpu::Bf16Products chosen = cpu::bf16_products();
  for (bool widened : {false, true}) {
    SCOPED_TRACE(widened ? "widened" : "dot");
    const bool available =
        widened ? cpu::blocked_gemm_available() : cpu::blocked_gemm_bf16_available();
    cpu::set_bf16_products(widened ? cpu::Bf16Products::widened : cpu::Bf16Products::dot);
    // Both from 128 in every dim; the vdpbf16ps kernel for sums of at most 2048 terms, or longer
    // ones into at most 2^16 elements of c, or 2^18 (kSplitSumMostOutput) of at least 256 rows
    // and columns, or sums of at most 4096 terms into 2^20 of at least 512 rows and columns.
    const bool ours = available && !cpu::onednn_uses_amx();
    EXPECT_EQ(cpu::kSplitSumMostOutput, int64_t{1} << 18);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(2048, 256, 256), ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(128, 512, 4096), ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(512, 512, 37000), ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(1024, 128, 8000), widened && ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(1024, 512, 8000), widened && ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(512, 2048, 4096), ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(2048, 512, 4096), ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(2048, 512, 4097), widened && ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(2048, 1024, 4096), widened && ours);
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(256, 4096, 4096), widened && ours);
    EXPECT_FALSE(cpu::blocked_gemm_bf16_applies(127, 1024, 1024));
    // Where oneDNN has AMX, its tile products instead.
    EXPECT_EQ(cpu::blocked_gemm_bf16_applies(m, n, k), ours);
    for (int layout = 0; layout < 3; ++layout) {
      SCOPED_TRACE(fmt::format("layout {}", layout));
      Product p(m, n, k, layout == 2, layout == 0, layout == 0, layout == 2, layout == 1, rng,
                true);
      p.widened = widened;
      const auto via_gemm = p.run_gemm();
      if (cpu::blocked_gemm_bf16_applies(m, n, k)) {
        EXPECT_EQ(via_gemm, p.run_kernel());
      }
      cpu::set_blocked_gemm_enabled(false);
      EXPECT_FALSE(cpu::blocked_gemm_bf16_applies(m, n, k));
      const auto onednn = p.run_gemm();
      cpu::set_blocked_gemm_enabled(true);
      p.expect_within_bound(onednn, 97);
      p.expect_within_bound(via_gemm, 97);
    }
  }
  cpu::set_bf16_products(cpu::Bf16Products::onednn);
  EXPECT_FALSE(cpu::blocked_gemm_bf16_applies(m, n, k));
  cpu::set_bf16_products(chosen);
}

// A small c with a long sum (a weight gradient's, over a batch's tokens): cpu::gemm has each of
// the 2 threads sum its half of the inner dimension with our kernel, the first into c (with the
// bias and c's old values), the second into a scratch added at the end. Its bits are those two
// kernel calls' sums added, and within the bound of the whole sum; an odd depth splits off the
// pairs of bf16.
TEST(BlockedGemmBf16, SmallProductsWithLongSumsSplitTheSumBetweenTheThreads) {
  std::mt19937 rng(17);
  const cpu::Bf16Products chosen = cpu::bf16_products();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  const int64_t m = 128, n = 160, k = 1537, half = k / 2;
  int split = 0;
  for (bool widened : {false, true})
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(fmt::format("{}, accumulate {}", widened ? "widened" : "dot", accumulate));
      cpu::set_bf16_products(widened ? cpu::Bf16Products::widened : cpu::Bf16Products::dot);
      Product p(m, n, k, true, false, true, accumulate, false, rng, true);
      const auto via_gemm = p.run_gemm();
      p.expect_within_bound(via_gemm);
      if (!cpu::blocked_gemm_bf16_applies(m, n, k)) continue;  // oneDNN's: no split
      const auto av = p.a_view(), bv = p.b_view();
      auto kernel = widened ? cpu::blocked_gemm_bf16_widened : cpu::blocked_gemm_bf16;
      std::vector<float> c = accumulate ? p.c_old : std::vector<float>(via_gemm.size(), NAN);
      std::vector<float> second(via_gemm.size());
      kernel(m, n, half, {p.a16.data(), av.row_stride, av.col_stride},
             {p.b16.data(), bv.row_stride, bv.col_stride}, p.bias_values.data(), accumulate, false,
             c.data(), n);
      kernel(m, n, k - half, {p.a16.data() + half * av.col_stride, av.row_stride, av.col_stride},
             {p.b16.data() + half * bv.row_stride, bv.row_stride, bv.col_stride}, nullptr, false,
             false, second.data(), n);
      for (size_t i = 0; i < c.size(); ++i) c[i] += second[i];
      EXPECT_EQ(via_gemm, c);
      ++split;
    }
  omp_set_num_threads(threads);
  cpu::set_bf16_products(chosen);
  if (split == 0) GTEST_SKIP() << "neither of our bf16 kernels applies here (AMX, or no AVX-512)";
}

// The same with f32 operands, where the blocked kernel applies (products of at least 2^30
// multiply-adds): base's weight gradient of a 512 x 512 projection over 4096 tokens is one; here a
// 256 x 256 c and an odd sum of 16385 terms, a transposed as in a weight gradient.
TEST(BlockedGemm, SmallProductsWithLongSumsSplitTheSumBetweenTheThreads) {
  if (!cpu::blocked_gemm_available()) GTEST_SKIP() << "this build has no blocked f32 kernel";
  std::mt19937 rng(18);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  const int64_t m = 256, n = 256, k = 16385, half = k / 2;
  ASSERT_TRUE(cpu::blocked_gemm_applies(m, n, k));
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(fmt::format("accumulate {}", accumulate));
    Product p(m, n, k, true, false, true, accumulate, false, rng);
    const auto via_gemm = p.run_gemm();
    p.expect_within_bound(via_gemm, 37);
    const auto av = p.a_view(), bv = p.b_view();
    std::vector<float> c = accumulate ? p.c_old : std::vector<float>(via_gemm.size(), NAN);
    std::vector<float> second(via_gemm.size());
    cpu::blocked_gemm_f32(m, n, half, av, bv, p.bias_values.data(), accumulate, false, c.data(), n);
    cpu::blocked_gemm_f32(m, n, k - half,
                          {av.data + half * av.col_stride, av.row_stride, av.col_stride},
                          {bv.data + half * bv.row_stride, bv.row_stride, bv.col_stride}, nullptr,
                          false, false, second.data(), n);
    for (size_t i = 0; i < c.size(); ++i) c[i] += second[i];
    EXPECT_EQ(via_gemm, c);
  }
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace tfm::internal
