// The panel kernel for decoding's few-row f32 products (kernels/cpu/panel_matmul_cpu.h): it reads
// the layout oneDNN packed (checked element by element), each element of y is within the f32
// rounding bound of the exact sum, a product's numbers do not depend on how it is split among
// threads (outside, inside an OpenMP region, one thread or several), and cpu::packed_linear takes
// it for up to 128 rows and oneDNN's product beyond. A bf16 weight widened to f32 (where the FMA
// outruns vdpbf16ps) gives the f32 products of the bf16 values.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>

#include "gradcheck.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/panel_matmul_cpu.h"

namespace tfm::internal {
namespace {

using testing::random_values;

std::vector<float> random_floats(int64_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  const auto v = random_values(n, rng, lo, hi);
  return std::vector<float>(v.begin(), v.end());
}

// y = x W^T (+ bias) by the panel kernel itself, whatever the row count.
std::vector<float> panel_product(const std::vector<float>& x, int64_t m, const cpu::PackedWeight& w,
                                 const float* bias, bool relu) {
  std::vector<float> y(static_cast<size_t>(m * w.out_features()),
                       std::numeric_limits<float>::quiet_NaN());
  cpu::panel_linear_f32(x.data(), m, w.out_features(), w.in_features(),
                        static_cast<const float*>(w.data()), bias,
                        relu ? kernels::PostOp::relu : kernels::PostOp::none, y.data());
  return y;
}

TEST(PanelMatmul, ReadsTheLayoutOneDnnPacked) {
  std::mt19937 rng(5);
  const int64_t n = 150, k = 37;  // 3 panels, the last of 22 columns; k padded to 48
  const auto w = random_floats(n * k, rng);
  const cpu::PackedWeight packed(w.data(), n, k, DType::f32);
  if (!cpu::panel_kernel_available()) {
    EXPECT_FALSE(packed.panels());  // a build without AVX-512 keeps oneDNN's products
    return;
  }
  ASSERT_TRUE(packed.panels()) << "oneDNN chose another f32 layout than BA16a64b on this CPU";
  const auto* data = static_cast<const float*>(packed.data());
  const int64_t kp = 48;
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t t = 0; t < kp; ++t)
      for (int64_t j = 0; j < cpu::kPanelColumns; ++j) {
        const int64_t column = p * cpu::kPanelColumns + j;
        const float expected =
            (t < k && column < n) ? w[static_cast<size_t>(column * k + t)] : 0.0f;
        ASSERT_EQ(data[(p * kp + t) * cpu::kPanelColumns + j], expected)
            << "panel " << p << " depth " << t << " column " << j;
      }
}

// Every element within the bound of recursive f32 summation, (k + 2) u sum |x w| + u |bias|.
TEST(PanelMatmul, EveryElementWithinTheRoundingBoundOfTheExactSum) {
  if (!cpu::panel_kernel_available()) GTEST_SKIP() << "this build has no AVX-512 (no panel kernel)";
  std::mt19937 rng(11);
  struct Case {
    int64_t m, n, k;
    bool bias, relu;
  };
  const double u = std::ldexp(1.0, -24);
  for (const Case& c :
       {Case{1, 1, 1, false, false}, Case{1, 64, 16, true, false}, Case{5, 65, 7, true, true},
        Case{6, 200, 63, false, true}, Case{7, 512, 64, true, false}, Case{13, 129, 65, true, true},
        Case{32, 1000, 512, true, false}, Case{130, 70, 130, false, false},
        Case{33, 512, 2048, true, true}}) {
    SCOPED_TRACE(fmt::format("m {} n {} k {} bias {} relu {}", c.m, c.n, c.k, c.bias, c.relu));
    const auto x = random_floats(c.m * c.k, rng);
    const auto w = random_floats(c.n * c.k, rng, -0.5, 0.5);
    const auto bias = c.bias ? random_floats(c.n, rng) : std::vector<float>{};
    const cpu::PackedWeight packed(w.data(), c.n, c.k, DType::f32);
    ASSERT_TRUE(packed.panels());
    const auto y = panel_product(x, c.m, packed, c.bias ? bias.data() : nullptr, c.relu);
    int64_t negatives = 0, zeros = 0;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double exact = c.bias ? bias[static_cast<size_t>(j)] : 0.0, magnitude = 0.0;
        for (int64_t t = 0; t < c.k; ++t) {
          const double product =
              double{x[static_cast<size_t>(i * c.k + t)]} * w[static_cast<size_t>(j * c.k + t)];
          exact += product;
          magnitude += std::abs(product);
        }
        const double bound = static_cast<double>(c.k + 2) * u * magnitude +
                             (c.bias ? u * std::abs(bias[static_cast<size_t>(j)]) : 0.0);
        const float got = y[static_cast<size_t>(i * c.n + j)];
        negatives += got < 0;
        zeros += got == 0.0f;
        ASSERT_LE(std::abs(got - (c.relu ? std::max(0.0, exact) : exact)), bound)
            << "row " << i << " column " << j;
      }
    // ReLU clamps about half of the outputs, and only with ReLU.
    if (c.relu) {
      EXPECT_EQ(negatives, 0);
      if (c.m * c.n > 100) {
        EXPECT_GT(zeros, c.m * c.n / 4);
      }
    } else if (c.m * c.n > 100) {
      EXPECT_GT(negatives, c.m * c.n / 4);
    }
  }
}

// Each element is the sequential f32 sum from the bias, one fused multiply-add per depth in order,
// however the depths fall into slices (the tiles keep their sums in registers within a slice and
// in memory, exactly, between slices): one slice, several, and a partial last one, on every row
// of a tile, with 64-deep slices (4 rows, one tile; 13 rows, tiles of 6, 6 and 1) and 256-deep
// ones (32 rows, 5 tiles of 6 and one of 2).
TEST(PanelMatmul, EveryElementIsTheSequentialFusedSum) {
  if (!cpu::panel_kernel_available()) GTEST_SKIP() << "this build has no AVX-512 (no panel kernel)";
  std::mt19937 rng(13);
  const int64_t n = 130;
  for (int64_t m : {4, 13, 32, 100})
    for (int64_t k : {1, 63, 65, 255, 256, 257, 600, 2048}) {
      SCOPED_TRACE(fmt::format("m {} k {}", m, k));
      const auto x = random_floats(m * k, rng);
      const auto w = random_floats(n * k, rng);
      const auto bias = random_floats(n, rng);
      const cpu::PackedWeight packed(w.data(), n, k, DType::f32);
      ASSERT_TRUE(packed.panels());
      for (bool relu : {false, true}) {
        const auto y = panel_product(x, m, packed, bias.data(), relu);
        int64_t clamped = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            float sum = bias[static_cast<size_t>(j)];
            for (int64_t t = 0; t < k; ++t)
              sum = std::fma(x[static_cast<size_t>(i * k + t)], w[static_cast<size_t>(j * k + t)],
                             sum);
            if (relu && sum < 0.0f) sum = 0.0f, ++clamped;
            ASSERT_EQ(y[static_cast<size_t>(i * n + j)], sum)
                << "row " << i << " column " << j << (relu ? " (ReLU)" : "");
          }
        EXPECT_EQ(clamped > m * n / 4, relu);  // about half of the sums are negative
      }
    }
}

// The sums run over k in one order whatever the split: the same bits from one thread, several, or
// the calling thread alone inside a parallel region (the output layer's blocks). 29 rows: the
// threads share the panels (7 threads, more than the 5 panels: ranges of rows too); 200 rows: 2 and
// 3 threads each take their own rows of every panel (parallel.h, kRowsPerThreadToSplitRows).
TEST(PanelMatmul, TheSameBitsWhateverTheThreads) {
  if (!cpu::panel_kernel_available()) GTEST_SKIP() << "this build has no AVX-512 (no panel kernel)";
  std::mt19937 rng(17);
  for (int64_t m : {29, 200}) {
    SCOPED_TRACE(fmt::format("m {}", m));
    const int64_t n = 300, k = 200;
    const auto x = random_floats(m * k, rng);
    const auto w = random_floats(n * k, rng);
    const auto bias = random_floats(n, rng);
    const cpu::PackedWeight packed(w.data(), n, k, DType::f32);
    auto product = [&] { return panel_product(x, m, packed, bias.data(), false); };
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = product();
    for (int team : {2, 3, 7}) {
      omp_set_num_threads(team);
      EXPECT_EQ(product(), one) << team << " threads";
    }
    omp_set_num_threads(threads);
    std::vector<std::vector<float>> inside(2);
#pragma omp parallel num_threads(2)
    inside[static_cast<size_t>(omp_get_thread_num())] = product();
    EXPECT_EQ(inside[0], one);
    EXPECT_EQ(inside[1], one);
  }
}

// A NaN or infinity in a row of x reaches that row's outputs only, as in any product.
TEST(PanelMatmul, ANaNInARowReachesThatRowOnly) {
  if (!cpu::panel_kernel_available()) GTEST_SKIP() << "this build has no AVX-512 (no panel kernel)";
  std::mt19937 rng(23);
  const int64_t m = 8, n = 70, k = 40;
  auto x = random_floats(m * k, rng);
  const auto w = random_floats(n * k, rng);
  x[static_cast<size_t>(3 * k + 39)] = std::numeric_limits<float>::quiet_NaN();
  const cpu::PackedWeight packed(w.data(), n, k, DType::f32);
  const auto y = panel_product(x, m, packed, nullptr, /*relu=*/true);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(std::isnan(y[static_cast<size_t>(i * n + j)]), i == 3) << i << " " << j;
}

// packed_linear: the panel kernel's bits for 1-128 rows (ReLU included), oneDNN's beyond.
TEST(PanelMatmul, PackedLinearTakesItForUpTo128Rows) {
  if (!cpu::panel_kernel_available()) GTEST_SKIP() << "this build has no AVX-512 (no panel kernel)";
  std::mt19937 rng(29);
  const int64_t n = 200, k = 96;
  const auto w = random_floats(n * k, rng);
  const auto bias = random_floats(n, rng);
  const cpu::PackedWeight packed(w.data(), n, k, DType::f32);
  for (int64_t m : {1, 4, 8, 9, 32, 33, 128, 129}) {
    SCOPED_TRACE(fmt::format("{} rows", m));
    const auto x = random_floats(m * k, rng);
    std::vector<float> y(static_cast<size_t>(m * n)), onednn(y.size());
    cpu::packed_linear(x.data(), m, packed, bias.data(), y.data(), kernels::PostOp::relu);
    cpu::packed_linear_onednn(x.data(), m, packed, bias.data(), onednn.data());
    for (float& v : onednn) v = v > 0.0f ? v : 0.0f;
    if (m <= 128) {
      EXPECT_EQ(y, panel_product(x, m, packed, bias.data(), true));
    } else {
      EXPECT_EQ(y, onednn);
    }
  }
}

// A bf16 weight packed while Bf16Products::widened is chosen: kept as f32, and packed_linear of
// bf16 x gives the bits of the f32 weight and x holding the same bf16 values, for few rows (the
// panel kernel) and many (oneDNN's f32 product); packed with oneDNN chosen, a bf16 weight that
// oneDNN multiplies, within the rounding bound of the same sums.
TEST(PackedBf16, AWidenedWeightGivesTheF32ProductsOfTheBf16Values) {
  std::mt19937 rng(31);
  const int64_t n = 200, k = 96;
  auto w = random_floats(n * k, rng);
  for (float& v : w) v = bf16_to_float(float_to_bf16(v));
  const auto bias = random_floats(n, rng);
  const cpu::Bf16Products chosen = cpu::bf16_products();
  cpu::set_bf16_products(cpu::Bf16Products::widened);
  // Not where oneDNN has AMX; always where oneDNN has no bf16 products (an AVX2-only CPU).
  const bool widens = cpu::bf16_products_widened() || !cpu::onednn_multiplies_bf16();
  const cpu::PackedWeight widened(w.data(), n, k, DType::bf16), f32(w.data(), n, k, DType::f32);
  cpu::set_bf16_products(cpu::Bf16Products::onednn);
  EXPECT_FALSE(cpu::bf16_products_widened());
  const cpu::PackedWeight onednn(w.data(), n, k, DType::bf16);
  cpu::set_bf16_products(chosen);
  EXPECT_EQ(widened.widened(), widens);
  EXPECT_EQ(onednn.widened(), !cpu::onednn_multiplies_bf16());
  EXPECT_EQ(widened.dtype(), DType::bf16);
  for (int64_t m : {1, 8, 9, 128, 129}) {
    SCOPED_TRACE(fmt::format("{} rows", m));
    auto x = random_floats(m * k, rng);
    std::vector<bf16> x16;
    for (float& v : x) x16.push_back(float_to_bf16(v)), v = bf16_to_float(x16.back());
    std::vector<float> y(static_cast<size_t>(m * n)), expected(y.size()), by_onednn(y.size());
    cpu::packed_linear(x16.data(), m, widened, bias.data(), y.data(), kernels::PostOp::relu);
    cpu::packed_linear(x16.data(), m, onednn, bias.data(), by_onednn.data(), kernels::PostOp::relu);
    cpu::packed_linear(x.data(), m, f32, bias.data(), expected.data(), kernels::PostOp::relu);
    if (widens) {
      EXPECT_EQ(y, expected);
    }
    // Both within (k + 2) u sum |x w| + u |bias| of the exact sum.
    const double u = std::ldexp(1.0, -24);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double exact = bias[static_cast<size_t>(j)], magnitude = std::abs(exact);
        for (int64_t t = 0; t < k; ++t) {
          const double product =
              double(x[static_cast<size_t>(i * k + t)]) * w[static_cast<size_t>(j * k + t)];
          exact += product, magnitude += std::abs(product);
        }
        const double bound = static_cast<double>(k + 2) * u * magnitude;
        const size_t at = static_cast<size_t>(i * n + j);
        ASSERT_NEAR(y[at], std::max(0.0, exact), bound) << i << " " << j;
        ASSERT_NEAR(by_onednn[at], std::max(0.0, exact), bound) << i << " " << j;
      }
  }
}

}  // namespace
}  // namespace tfm::internal
