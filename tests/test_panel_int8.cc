// The int8 panel kernel (kernels/cpu/panel_int8_cpu.h): its packed layout (hand-checked), its s32
// products against the exact integer arithmetic (every shape off its tiles and groups, operands at
// the ends of their ranges), on the calling thread inside a parallel region, its dequantisation in
// the same pass (dequantize_product's bits), its quantising x in its own parallel region (the two
// passes' bits), its reading oneDNN's own copy with VNNI, and
// packed_linear's choice of it for few rows (the same numbers as oneDNN's products).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/panel_int8_cpu.h"
#include "tfm/kernels/cpu/quantize_cpu.h"

namespace tfm::internal {
namespace {

// acc [m, n] = u [m, k] q^T, exactly.
std::vector<int32_t> exact_product(const std::vector<uint8_t>& u, const std::vector<int8_t>& q,
                                   int64_t m, int64_t n, int64_t k) {
  std::vector<int32_t> acc(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t t = 0; t < k; ++t)
        sum += int64_t{u[static_cast<size_t>(i * k + t)]} * q[static_cast<size_t>(j * k + t)];
      acc[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(sum);
    }
  return acc;
}

// u [m, k] drawn uniformly from [low, high], then q [n, k] from [-127, 127].
struct Operands {
  std::vector<uint8_t> u;
  std::vector<int8_t> q;
};
Operands random_operands(std::mt19937& rng, int64_t m, int64_t n, int64_t k, int low = 0,
                         int high = 127) {
  std::uniform_int_distribution<int> activation(low, high), weight(-127, 127);
  Operands o{std::vector<uint8_t>(static_cast<size_t>(m * k)),
             std::vector<int8_t>(static_cast<size_t>(n * k))};
  for (auto& v : o.u) v = static_cast<uint8_t>(activation(rng));
  for (auto& v : o.q) v = static_cast<int8_t>(weight(rng));
  return o;
}

std::vector<int8_t> packed(const std::vector<int8_t>& q, int64_t n, int64_t k) {
  std::vector<int8_t> panels(static_cast<size_t>(cpu::int8_panel_bytes(n, k)));
  cpu::pack_int8_panels(q.data(), n, k, panels.data());
  return panels;
}

TEST(PanelInt8, LayoutHandChecked) {
  // n 70 (two panels, the second of 6 columns), k 6 (two groups, the second half empty).
  const int64_t n = 70, k = 6;
  std::vector<int8_t> q(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) q[static_cast<size_t>(j * k + i)] = static_cast<int8_t>(j - i);
  EXPECT_EQ(cpu::int8_panel_bytes(n, k), 2 * 2 * 64 * 4);
  const std::vector<int8_t> panels = packed(q, n, k);
  // Panel 0, group 0: column 0's k 0..3, then column 1's; group 1: column 0's k 4, 5, 0, 0.
  EXPECT_EQ(std::vector<int>(panels.begin(), panels.begin() + 8),
            (std::vector<int>{0, -1, -2, -3, 1, 0, -1, -2}));
  EXPECT_EQ(std::vector<int>(panels.begin() + 256, panels.begin() + 260),
            (std::vector<int>{-4, -5, 0, 0}));
  // Panel 1 (at 512 bytes), group 0, its column 5 (W's row 69): 69, 68, 67, 66; column 6 is none.
  EXPECT_EQ(std::vector<int>(panels.begin() + 512 + 20, panels.begin() + 512 + 28),
            (std::vector<int>{69, 68, 67, 66, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int>(panels.begin() + 512 + 256 + 20, panels.begin() + 512 + 256 + 24),
            (std::vector<int>{65, 64, 0, 0}));
}

TEST(PanelInt8, ProductsEqualTheIntegerArithmetic) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  std::mt19937 rng(91);
  for (int64_t m : {1, 2, 4, 5, 6, 7, 8, 13})
    for (int64_t n : {1, 19, 64, 70, 130})
      for (int64_t k : {1, 3, 4, 37, 64, 513}) {
        SCOPED_TRACE(testing::Message() << "m " << m << " n " << n << " k " << k);
        auto [u, q] = random_operands(rng, m, n, k);
        const std::vector<int8_t> panels = packed(q, n, k);
        std::vector<int32_t> acc(static_cast<size_t>(m * n), -1);
        cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                                acc.data());
        ASSERT_EQ(acc, exact_product(u, q, m, n, k));
      }
}

TEST(PanelInt8, OperandsAtTheEndsOfTheirRangesAddUpExactly) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  // u 127 against q +-127: every pair vpmaddubsw adds is +-32258, the largest it must hold.
  const int64_t m = 3, n = 3, k = 1024;
  std::vector<uint8_t> u(static_cast<size_t>(m * k), 127);
  for (int64_t t = 0; t < k; t += 2) u[static_cast<size_t>(2 * k + t)] = 0;  // row 2: 127, 0, ...
  std::vector<int8_t> q(static_cast<size_t>(n * k), 127);
  for (int64_t t = 0; t < k; ++t) {
    q[static_cast<size_t>(k + t)] = -127;
    q[static_cast<size_t>(2 * k + t)] = static_cast<int8_t>(t % 2 ? -127 : 127);
  }
  const std::vector<int8_t> panels = packed(q, n, k);
  std::vector<int32_t> acc(static_cast<size_t>(m * n));
  cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k), acc.data());
  EXPECT_EQ(acc, exact_product(u, q, m, n, k));
  EXPECT_EQ(acc[0], 127 * 127 * 1024);
}

// Built for a CPU with AVX512-VNNI the kernel multiplies with vpdpbusd, exact for every u8: 255
// against q +-127, four products of +-32385 in each s32 sum.
TEST(PanelInt8, WithVnniEightBitActivationsAddUpExactly) {
#ifndef __AVX512VNNI__
  GTEST_SKIP() << "this build has no AVX512-VNNI: the kernel takes 7-bit activations only";
#else
  std::mt19937 rng(93);
  for (int64_t k : {1, 5, 1024}) {
    SCOPED_TRACE(testing::Message() << "k " << k);
    const int64_t m = 7, n = 70;
    auto [u, q] = random_operands(rng, m, n, k, 0, 255);
    std::fill(u.begin(), u.begin() + k, 255);  // row 0 against W's row 0 of 127s and row 1 of -127s
    std::fill(q.begin(), q.begin() + k, 127);
    std::fill(q.begin() + k, q.begin() + 2 * k, -127);
    const std::vector<int8_t> panels = packed(q, n, k);
    std::vector<int32_t> acc(static_cast<size_t>(m * n), -1);
    cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                            acc.data());
    ASSERT_EQ(acc, exact_product(u, q, m, n, k));
    EXPECT_EQ(acc[0], 255 * 127 * k);
    EXPECT_EQ(acc[1], -255 * 127 * k);
  }
#endif
}

TEST(PanelInt8, EveryThreadAloneInsideAParallelRegion) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  std::mt19937 rng(92);
  const int64_t m = 4, n = 300, k = 100;
  const auto [u, q] = random_operands(rng, m, n, k);
  const std::vector<int8_t> panels = packed(q, n, k);
  const std::vector<int32_t> want = exact_product(u, q, m, n, k);
  std::vector<std::vector<int32_t>> got(4, std::vector<int32_t>(want.size()));
#pragma omp parallel for num_threads(2)
  for (int i = 0; i < 4; ++i)
    cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                            got[static_cast<size_t>(i)].data());
  for (const auto& g : got) EXPECT_EQ(g, want);
}

// With fewer than two panels a thread, the threads share ranges of a panel's rows: 7 threads over
// 3 panels and 50 rows (9 tiles) give each panel 5 ranges of 12 rows, the last of 2.
TEST(PanelInt8, ThreadsShareAPanelsRowsWhenPanelsAreFew) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  std::mt19937 rng(96);
  const int64_t m = 50, n = 130, k = 100;
  const auto [u, q] = random_operands(rng, m, n, k);
  const std::vector<int8_t> panels = packed(q, n, k);
  std::vector<int32_t> acc(static_cast<size_t>(m * n), -1);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(7);
  cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k), acc.data());
  omp_set_num_threads(threads);
  EXPECT_EQ(acc, exact_product(u, q, m, n, k));
}

// From kRowsPerThreadToSplitRows rows a thread (parallel.h) each thread takes its own rows of every
// panel: 96 rows on 2 threads (48 each), 100 and 301 on 2 and 3 (chunks that are not whole tiles).
TEST(PanelInt8, ManyRowsEachThreadItsOwnRows) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  std::mt19937 rng(97);
  const int64_t n = 130, k = 100;
  const int threads = omp_get_max_threads();
  for (int64_t m : {96, 100, 301})
    for (int team : {2, 3}) {
      SCOPED_TRACE(testing::Message() << "m " << m << " threads " << team);
      const auto [u, q] = random_operands(rng, m, n, k);
      const std::vector<int8_t> panels = packed(q, n, k);
      std::vector<int32_t> acc(static_cast<size_t>(m * n), -1);
      omp_set_num_threads(team);
      cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                              acc.data());
      omp_set_num_threads(threads);
      ASSERT_EQ(acc, exact_product(u, q, m, n, k));
    }
}

// panel_linear_u8s8 dequantises from the sums in registers: the same bits as the s32 product
// followed by dequantize_product, for both zero points where the kernel is exact, with and without
// bias and ReLU, at column counts off the panels' 16-lane vectors, and for rows whose scale is 0 or
// NaN (the whole row NaN, or 0 after ReLU).
TEST(PanelInt8, FusedDequantisationGivesDequantizeProductsBits) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  std::mt19937 rng(94);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  int zero_points_run = 0;
  int64_t nonzero = 0;
  for (int32_t zero_point : {cpu::kSaturatingZeroPoint, cpu::kNativeZeroPoint}) {
    if (!cpu::int8_panel_kernel_exact_for(zero_point)) continue;
    ++zero_points_run;
    for (int64_t m : {1, 6, 7, 13})
      for (int64_t n : {1, 19, 70, 130})
        for (int64_t k : {1, 5, 37, 513})
          for (int variant = 0; variant < 4; ++variant) {
            const bool with_bias = variant & 1, relu = variant & 2;
            SCOPED_TRACE(testing::Message()
                         << "Z " << zero_point << " m " << m << " n " << n << " k " << k << " bias "
                         << with_bias << " relu " << relu);
            const auto [u, q] = random_operands(rng, m, n, k, 1, 2 * zero_point - 1);
            std::vector<float> x_scales(static_cast<size_t>(m)), w_scales(static_cast<size_t>(n)),
                bias(static_cast<size_t>(n));
            for (auto* v : {&x_scales, &w_scales, &bias})
              for (auto& e : *v) e = value(rng) * 0.01f;
            x_scales[0] = 0.0f;
            if (m > 1) x_scales[1] = std::numeric_limits<float>::quiet_NaN();
            std::vector<int32_t> sums(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j)
              for (int64_t t = 0; t < k; ++t) sums[static_cast<size_t>(j)] += q[j * k + t];
            const std::vector<int8_t> panels = packed(q, n, k);
            std::vector<int32_t> acc(static_cast<size_t>(m * n));
            cpu::panel_product_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                                    acc.data());
            std::vector<float> want(acc.size()), got(acc.size(), -1.0f);
            cpu::dequantize_product(acc.data(), m, n, x_scales.data(), w_scales.data(), sums.data(),
                                    with_bias ? bias.data() : nullptr, relu, want.data(),
                                    zero_point);
            cpu::Int8Epilogue epilogue;
            epilogue.x_scales = x_scales.data();
            epilogue.w_scales = w_scales.data();
            epilogue.w_row_sums = sums.data();
            epilogue.bias = with_bias ? bias.data() : nullptr;
            epilogue.post = relu ? kernels::PostOp::relu : kernels::PostOp::none;
            epilogue.zero_point = zero_point;
            cpu::panel_linear_u8s8(u.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                                   epilogue, got.data());
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
            if (m > 1 && !relu) {
              EXPECT_TRUE(std::isnan(got[static_cast<size_t>(n)]));
            }
            nonzero += std::count_if(got.begin(), got.end(),
                                     [](float e) { return e != 0.0f && !std::isnan(e); });
          }
  }
  EXPECT_GE(zero_points_run, 1);
  EXPECT_GT(nonzero, 10000);
}

// panel_linear_quantising quantises x in the product's own parallel region: the same u, scales
// and y bits as quantize_rows_u8 and then panel_linear_u8s8, for any number of threads (more
// threads than rows included), with an all-zero row and a row holding a NaN.
TEST(PanelInt8, QuantisingInTheProductsRegionGivesTheTwoPassesBits) {
  if (!cpu::int8_panel_kernel_available())
    GTEST_SKIP() << "this build has no AVX512BW: int8 products stay oneDNN's";
  std::mt19937 rng(96);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  const int threads_before = omp_get_max_threads();
  int zero_points_run = 0;
  int64_t nonzero = 0;
  for (int32_t zero_point : {cpu::kSaturatingZeroPoint, cpu::kNativeZeroPoint}) {
    if (!cpu::int8_panel_kernel_exact_for(zero_point)) continue;
    ++zero_points_run;
    for (int threads : {1, 2, 7})
      for (int64_t m : {1, 5, 13, 128, 400})
        for (int64_t n : {19, 130})
          for (int64_t k : {5, 70, 512}) {
            SCOPED_TRACE(testing::Message() << "Z " << zero_point << " threads " << threads << " m "
                                            << m << " n " << n << " k " << k);
            omp_set_num_threads(threads);
            std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k)),
                bias(static_cast<size_t>(n));
            for (auto* v : {&x, &w, &bias})
              for (auto& e : *v) e = value(rng);
            if (m > 2) {
              std::fill(x.begin(), x.begin() + k, 0.0f);
              x[static_cast<size_t>(2 * k - 1)] = std::numeric_limits<float>::quiet_NaN();
            }
            std::vector<int8_t> q(w.size());
            std::vector<float> w_scales(static_cast<size_t>(n));
            cpu::quantize_rows_s8(w.data(), n, k, q.data(), w_scales.data());
            std::vector<int32_t> sums(static_cast<size_t>(n));
            for (int64_t j = 0; j < n; ++j)
              for (int64_t t = 0; t < k; ++t) sums[static_cast<size_t>(j)] += q[j * k + t];
            const std::vector<int8_t> panels = packed(q, n, k);
            cpu::Int8Epilogue e;
            e.w_scales = w_scales.data();
            e.w_row_sums = sums.data();
            e.bias = bias.data();
            e.zero_point = zero_point;

            std::vector<uint8_t> u_want(x.size()), u_got(x.size());
            std::vector<float> scales_want(static_cast<size_t>(m)), scales_got(scales_want.size());
            std::vector<float> want(static_cast<size_t>(m * n)), got(want.size(), -1.0f);
            cpu::quantize_rows_u8(x.data(), m, k, u_want.data(), scales_want.data(), zero_point);
            e.x_scales = scales_want.data();
            cpu::panel_linear_u8s8(u_want.data(), m, n, k, panels.data(), cpu::int8_panel_groups(k),
                                   e, want.data());
            e.x_scales = nullptr;
            cpu::panel_linear_quantising(x.data(), m, n, k, panels.data(),
                                         cpu::int8_panel_groups(k), e, u_got.data(),
                                         scales_got.data(), got.data());
            EXPECT_EQ(u_got, u_want);
            ASSERT_EQ(std::memcmp(scales_got.data(), scales_want.data(), m * sizeof(float)), 0);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
            if (m > 2) {
              EXPECT_EQ(scales_got[0], 0.0f);
              EXPECT_TRUE(std::isnan(scales_got[1]));
              EXPECT_TRUE(std::isnan(got[static_cast<size_t>(n)]));
            }
            nonzero += std::count_if(got.begin(), got.end(),
                                     [](float v) { return v != 0.0f && !std::isnan(v); });
          }
  }
  omp_set_num_threads(threads_before);
  EXPECT_GE(zero_points_run, 1);
  EXPECT_GT(nonzero, 100000);
}

// With VNNI (and no AMX) the kernel reads oneDNN's own packed copy (BA16a64b4a, k in blocks of
// 64): its s32 products equal oneDNN's, here with k off the blocks and n off the panels.
TEST(PanelInt8, WithVnniReadsOneDnnsOwnCopy) {
  if (!cpu::native_int8_products() || cpu::onednn_uses_amx() ||
      !cpu::int8_panel_kernel_exact_for(cpu::kNativeZeroPoint))
    GTEST_SKIP() << "not a CPU with AVX512-VNNI and no AMX under a build with VNNI kernels";
  std::mt19937 rng(95);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> activation(0, 255);
  for (int64_t k : {16, 70, 512}) {
    SCOPED_TRACE(testing::Message() << "k " << k);
    const int64_t m = 13, n = 130;
    std::vector<float> w(static_cast<size_t>(n * k));
    for (auto& e : w) e = value(rng);
    const cpu::PackedWeight weight(w.data(), n, k, DType::i8);
    ASSERT_NE(weight.int8_panels(), nullptr);
    EXPECT_EQ(weight.int8_panels(), weight.data());
    EXPECT_EQ(weight.int8_panel_groups(), (k + 63) / 64 * 16);
    std::vector<uint8_t> u(static_cast<size_t>(m * k));
    for (auto& v : u) v = static_cast<uint8_t>(activation(rng));
    std::vector<int32_t> ours(static_cast<size_t>(m * n)), onednn(ours.size());
    cpu::panel_product_u8s8(u.data(), m, n, k, weight.int8_panels(), weight.int8_panel_groups(),
                            ours.data());
    cpu::packed_product_u8s8_onednn(u.data(), m, weight, onednn.data());
    EXPECT_EQ(ours, onednn);
    EXPECT_TRUE(std::any_of(ours.begin(), ours.end(), [](int32_t e) { return e != 0; }));
  }
}

// packed_linear takes the kernel for few rows (up to 64 on a CPU without VNNI, 128 with) and
// oneDNN beyond: both give exact s32 sums and dequantise alike, so a row multiplied alone (the
// kernel) and within 129 rows (oneDNN) comes out with the same bits.
TEST(PanelInt8, PackedLinearGivesOneDnnsNumbersForFewRows) {
  std::mt19937 rng(93);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const int64_t rows = 129, n = 130, k = 70;
  std::vector<float> x(static_cast<size_t>(rows * k)), w(static_cast<size_t>(n * k)),
      bias(static_cast<size_t>(n));
  for (auto* v : {&x, &w, &bias})
    for (auto& e : *v) e = value(rng);
  const cpu::PackedWeight weight(w.data(), n, k, DType::i8);
  if (!cpu::native_int8_products()) {
    EXPECT_EQ(weight.int8_panels() != nullptr, cpu::int8_panel_kernel_available());
  } else if (!cpu::onednn_uses_amx()) {
    EXPECT_EQ(weight.int8_panels() != nullptr,
              cpu::int8_panel_kernel_exact_for(cpu::kNativeZeroPoint));
  }
  std::vector<float> all(static_cast<size_t>(rows * n)), one(static_cast<size_t>(n));
  cpu::packed_linear(x.data(), rows, weight, bias.data(), all.data(), kernels::PostOp::relu);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::packed_linear(x.data() + r * k, 1, weight, bias.data(), one.data(), kernels::PostOp::relu);
    EXPECT_EQ(one, std::vector<float>(all.begin() + r * n, all.begin() + (r + 1) * n))
        << "row " << r;
  }
}

}  // namespace
}  // namespace tfm::internal
