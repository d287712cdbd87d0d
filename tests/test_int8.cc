// int8 inference (InferenceOptions::int8): the quantisation of rows (hand-checked), the packed int8
// product against the same quantised arithmetic in double precision and against the f32 product,
// the output layer's fused log-softmax and top-k over int8 blocks, and whole translations against
// f32. The activations take 8 bits on a CPU with AVX512-VNNI or AMX and 7 bits elsewhere
// (quantize_cpu.h); the products are checked with this CPU's code, and with 7 bits on every CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "gradcheck.h"
#include "temp_dir.h"
#include "test_decode_helpers.h"
#include "tfm/decode/translate.h"
#include "tfm/kernels/cpu/log_softmax_top_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/quantize_cpu.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal {
namespace {

using testing::random_values;
using testing::Values;

std::vector<float> floats_of(const Values& v) {
  return std::vector<float>(v.begin(), v.end());
}

TEST(Int8Quantize, RowsHandChecked) {
  // Row 0: scale 2/127, so 1 -> 63.5 (ties to even: 64), -2 -> -127, 0.5 -> 31.75 -> 32.
  // Row 1: all zero, scale 0. Row 2: scale 254/127 = 2; 1e-3 -> 0; -63 -> -31.5 -> -32 (even).
  const std::vector<float> x = {1, -2, 0.5f, 0, 0, 0, 0, 0, 127, 254, -63, 1e-3f};
  std::vector<int8_t> q(12);
  std::vector<float> scales(3);
  cpu::quantize_rows_s8(x.data(), 3, 4, q.data(), scales.data());
  EXPECT_FLOAT_EQ(scales[0], 2.0f / 127.0f);
  EXPECT_EQ(scales[1], 0.0f);
  EXPECT_FLOAT_EQ(scales[2], 2.0f);
  EXPECT_EQ(std::vector<int>(q.begin(), q.end()),
            (std::vector<int>{64, -127, 32, 0, 0, 0, 0, 0, 64, 127, -32, 0}));
  std::vector<uint8_t> u(12);
  cpu::quantize_rows_u8(x.data(), 3, 4, u.data(), scales.data(), cpu::kNativeZeroPoint);
  EXPECT_EQ(std::vector<int>(u.begin(), u.end()),
            (std::vector<int>{192, 1, 160, 128, 128, 128, 128, 128, 192, 255, 96, 128}));
}

// Every column of rows of 1 to 200 columns (the vector loops of 64 and 16 columns and the scalar
// tail, each alone and together) against the scalar formula q = nearbyint(clamp(x / scale,
// -levels, levels)) + zero point, for weights (s8) and for activations of 8 and 7 bits (u8). The
// rows hold values that land on ties of the rounding (k + 0.5 after scaling) and the row's
// largest magnitude of either sign.
TEST(Int8Quantize, EveryColumnIsTheScalarRounding) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto expected = [](float x, float scale, int32_t levels, int32_t zero_point) {
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    const float bound = static_cast<float>(levels);
    const float v = std::min(bound, std::max(-bound, x * inverse));
    return static_cast<int32_t>(std::nearbyint(v)) + zero_point;
  };
  int64_t checked = 0;
  for (int64_t cols = 1; cols <= 200; ++cols) {
    std::vector<float> x(static_cast<size_t>(cols));
    for (float& v : x) v = uniform(rng);
    // Ties: with the largest magnitude 127 (s8 scale 1), the values k + 0.5.
    x[static_cast<size_t>(cols - 1)] = cols % 2 ? 127.0f : -127.0f;
    for (int64_t j = 0; j + 1 < cols; j += 3) x[static_cast<size_t>(j)] = -40.5f + j % 81;
    std::vector<int8_t> q(x.size());
    float scale = 0;
    cpu::quantize_rows_s8(x.data(), 1, cols, q.data(), &scale);
    for (int64_t j = 0; j < cols; ++j, ++checked)
      ASSERT_EQ(q[static_cast<size_t>(j)], expected(x[static_cast<size_t>(j)], scale, 127, 0))
          << cols << " columns, column " << j;
    for (int32_t zero_point : {cpu::kNativeZeroPoint, cpu::kSaturatingZeroPoint}) {
      std::vector<uint8_t> u(x.size());
      cpu::quantize_rows_u8(x.data(), 1, cols, u.data(), &scale, zero_point);
      for (int64_t j = 0; j < cols; ++j, ++checked)
        ASSERT_EQ(u[static_cast<size_t>(j)],
                  expected(x[static_cast<size_t>(j)], scale, zero_point - 1, zero_point))
            << cols << " columns, column " << j << ", zero point " << zero_point;
    }
  }
  EXPECT_EQ(checked, 3 * 200 * 201 / 2);
}

TEST(Int8Quantize, SevenBitActivationsHandChecked) {
  // 63 levels, zero point 64. Row 0: scale 3/63 = 1/21, so -1.1 -> -23.1 -> -23, 0.6 -> 12.6 ->
  // 13. Row 1: all zero. Row 2: scale 126/63 = 2; 5 -> 2.5 -> 2 (ties to even), -7 -> -3.5 -> -4.
  const std::vector<float> x = {3, -1.1f, 0.6f, 0, 0, 0, 0, 0, 126, 5, -7, -126};
  std::vector<uint8_t> u(12);
  std::vector<float> scales(3);
  cpu::quantize_rows_u8(x.data(), 3, 4, u.data(), scales.data(), cpu::kSaturatingZeroPoint);
  EXPECT_FLOAT_EQ(scales[0], 3.0f / 63.0f);
  EXPECT_EQ(scales[1], 0.0f);
  EXPECT_FLOAT_EQ(scales[2], 2.0f);
  EXPECT_EQ(std::vector<int>(u.begin(), u.end()),
            (std::vector<int>{127, 41, 77, 64, 64, 64, 64, 64, 127, 66, 60, 1}));
  testing::expect_error(
      [&] { cpu::quantize_rows_u8(x.data(), 3, 4, u.data(), scales.data(), 100); },
      {"int8: activation zero point 100 (must be 128 or 64)"});
}

TEST(Int8Quantize, TheScaleIsTheRowsLargestMagnitudeWhereverItIs) {
  // row_scale takes the maximum in four registers 64 columns at a time, then 16 at a time, then a
  // masked tail: the largest magnitude (either sign) is found in each part of rows of every kind.
  for (int64_t cols : {5, 16, 40, 64, 100, 150, 512}) {
    for (int64_t at = 0; at < cols; ++at) {
      for (const float peak : {3.5f, -3.5f}) {
        std::vector<float> x(static_cast<size_t>(cols));
        for (int64_t j = 0; j < cols; ++j)
          x[static_cast<size_t>(j)] = 0.001f * static_cast<float>(j % 97) - 0.05f;
        x[static_cast<size_t>(at)] = peak;
        std::vector<int8_t> q(x.size());
        float scale = 0.0f;
        cpu::quantize_rows_s8(x.data(), 1, cols, q.data(), &scale);
        ASSERT_EQ(scale, 3.5f / 127.0f) << cols << " columns, largest at " << at;
        ASSERT_EQ(q[static_cast<size_t>(at)], peak > 0 ? 127 : -127);
      }
    }
  }
}

TEST(Int8Quantize, ANaNAnywhereInARowMakesItsScaleAndProductNaN) {
  // The vector max drops a NaN or keeps it depending on its lane and on what follows it: every
  // position of rows that are shorter than, equal to and longer than a register is tried, with
  // larger values after the NaN. The NaNs: the quiet one, the same with its sign bit set, and the
  // NaN nearest to infinity (fraction 1), whose bits as an integer are one above +inf's.
  const float nans[] = {std::nanf(""), -std::nanf(""), std::bit_cast<float>(0x7f800001u)};
  for (int32_t zero_point : {cpu::kNativeZeroPoint, cpu::kSaturatingZeroPoint}) {
    for (int64_t cols : {5, 16, 40, 64, 100, 150}) {
      for (int64_t at = 0; at < cols; ++at) {
        std::vector<float> x(static_cast<size_t>(2 * cols));
        for (int64_t j = 0; j < 2 * cols; ++j) x[static_cast<size_t>(j)] = 0.25f * (j % cols) - 1;
        x[static_cast<size_t>(at)] = nans[(cols + at) % 3];
        std::vector<uint8_t> u(x.size());
        std::vector<float> scales(2);
        cpu::quantize_rows_u8(x.data(), 2, cols, u.data(), scales.data(), zero_point);
        ASSERT_TRUE(std::isnan(scales[0])) << cols << " columns, NaN at " << at;
        ASSERT_FLOAT_EQ(scales[1], std::max(1.0f, 0.25f * static_cast<float>(cols - 1) - 1) /
                                       static_cast<float>(zero_point - 1))
            << "the other row is untouched";
        for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(u[static_cast<size_t>(j)], zero_point);
        // Its products (with a bias, no ReLU: ReLU maps NaN to 0, as the f32 ReLU does): NaN in
        // every column of that row, finite in the other's.
        const std::vector<int32_t> acc = {300, -7, 300, -7};
        const std::vector<float> x_scales = {scales[0], scales[1]}, w_scales = {0.5f, 2.0f},
                                 bias = {1.0f, -1.0f};
        const std::vector<int32_t> row_sums = {3, -1};
        std::vector<float> y(4);
        cpu::dequantize_product(acc.data(), 2, 2, x_scales.data(), w_scales.data(), row_sums.data(),
                                bias.data(), false, y.data(), zero_point);
        EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
        EXPECT_TRUE(std::isfinite(y[2]) && std::isfinite(y[3]));
      }
    }
  }
}

TEST(Int8Quantize, AnInfinityOfEitherSignMakesTheScaleInfinite) {
  for (int64_t cols : {5, 64, 150})
    for (float infinity :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(static_cast<size_t>(cols), 0.5f);
      x[static_cast<size_t>(cols / 2)] = infinity;
      std::vector<uint8_t> u(x.size());
      float scale = 0;
      cpu::quantize_rows_u8(x.data(), 1, cols, u.data(), &scale, cpu::kNativeZeroPoint);
      EXPECT_EQ(scale, std::numeric_limits<float>::infinity()) << cols << " columns";
    }
}

// The exact value of the int8 product: sum_j qx_j qw_j sx sw + bias, in double, with x quantised
// as activations with zero point Z (qx = u - Z) and w as weights.
std::vector<double> quantised_product(const std::vector<float>& x, const std::vector<float>& w,
                                      const std::vector<float>& bias, int64_t m, int64_t n,
                                      int64_t k, bool relu,
                                      int32_t zero_point = cpu::activation_zero_point()) {
  std::vector<uint8_t> ux(static_cast<size_t>(m * k));
  std::vector<int8_t> qw(static_cast<size_t>(n * k));
  std::vector<float> sx(static_cast<size_t>(m)), sw(static_cast<size_t>(n));
  cpu::quantize_rows_u8(x.data(), m, k, ux.data(), sx.data(), zero_point);
  cpu::quantize_rows_s8(w.data(), n, k, qw.data(), sw.data());
  std::vector<int32_t> qx(ux.size());
  for (size_t i = 0; i < ux.size(); ++i) qx[i] = int32_t{ux[i]} - zero_point;
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t dot = 0;
      for (int64_t c = 0; c < k; ++c)
        dot += int64_t{qx[static_cast<size_t>(i * k + c)]} * qw[static_cast<size_t>(j * k + c)];
      double v =
          static_cast<double>(dot) * sx[static_cast<size_t>(i)] * sw[static_cast<size_t>(j)] +
          (bias.empty() ? 0.0 : bias[static_cast<size_t>(j)]);
      y[static_cast<size_t>(i * n + j)] = relu ? std::max(0.0, v) : v;
    }
  return y;
}

// max |a - b| / max |b|
double relative_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

// Shapes off oneDNN's tiles (n and k not multiples of 16 or 4), one row to a few hundred, with and
// without bias and ReLU: the packed int8 product equals the quantised arithmetic to f32 rounding
// (the s32 sums are exact; the epilogue rounds two products and a sum), and differs from the f32
// product by the quantisation only.
TEST(Int8PackedLinear, EqualsTheQuantisedArithmetic) {
  std::mt19937 rng(71);
  struct Case {
    int64_t m, n, k;
    bool bias, relu;
  };
  for (const Case& c : {Case{1, 19, 37, false, false}, Case{3, 70, 64, true, false},
                        Case{17, 33, 100, true, true}, Case{130, 64, 512, true, false}}) {
    SCOPED_TRACE(fmt::format("m {} n {} k {} bias {} relu {}", c.m, c.n, c.k, c.bias, c.relu));
    const auto x = floats_of(random_values(c.m * c.k, rng));
    const auto w = floats_of(random_values(c.n * c.k, rng, -0.3, 0.3));
    const auto bias = c.bias ? floats_of(random_values(c.n, rng)) : std::vector<float>{};
    const float* bias_data = c.bias ? bias.data() : nullptr;
    const cpu::PackedWeight packed(w.data(), c.n, c.k, DType::i8);
    EXPECT_EQ(packed.dtype(), DType::i8);
    // This CPU's activations (packed_linear quantises them), then 7-bit ones on every CPU.
    std::vector<float> y(static_cast<size_t>(c.m * c.n)), y7(y.size());
    cpu::packed_linear(x.data(), c.m, packed, bias_data, y.data(),
                       c.relu ? kernels::PostOp::relu : kernels::PostOp::none);
    EXPECT_LT(relative_difference(y, quantised_product(x, w, bias, c.m, c.n, c.k, c.relu)), 1e-6);
    std::vector<uint8_t> u(static_cast<size_t>(c.m * c.k));
    std::vector<float> x_scales(static_cast<size_t>(c.m));
    cpu::quantize_rows_u8(x.data(), c.m, c.k, u.data(), x_scales.data(), cpu::kSaturatingZeroPoint);
    cpu::packed_linear_quantized(u.data(), x_scales.data(), c.m, packed, bias_data, y7.data(),
                                 c.relu ? kernels::PostOp::relu : kernels::PostOp::none,
                                 cpu::kSaturatingZeroPoint);
    EXPECT_LT(relative_difference(y7, quantised_product(x, w, bias, c.m, c.n, c.k, c.relu,
                                                        cpu::kSaturatingZeroPoint)),
              1e-6);

    // Against the f32 product: each operand moves by at most half a step (1/(2 L) of its row's
    // largest magnitude, L = 127 for weights, 127 or 63 for activations), so the sums move by
    // about (1/L_x + 1/127) / 2 of their scale at most: 0.8% with 8-bit activations (seen:
    // 0.34-0.55%), 1.2% with 7-bit ones (seen: 0.53-0.96%). The bound is 1.5 times that.
    std::vector<double> exact(static_cast<size_t>(c.m * c.n));
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double s = c.bias ? bias[static_cast<size_t>(j)] : 0.0;
        for (int64_t t = 0; t < c.k; ++t)
          s += double{x[static_cast<size_t>(i * c.k + t)]} * w[static_cast<size_t>(j * c.k + t)];
        exact[static_cast<size_t>(i * c.n + j)] = c.relu ? std::max(0.0, s) : s;
      }
    for (const auto& [got, zero_point] :
         {std::pair{&y, cpu::activation_zero_point()}, std::pair{&y7, cpu::kSaturatingZeroPoint}}) {
      const double error = relative_difference(*got, exact);
      const double bound = 1.5 * (1.0 / (zero_point - 1) + 1.0 / 127) / 2;
      EXPECT_LT(error, bound) << "activations with zero point " << zero_point;
      EXPECT_GT(error, 1e-4) << "really quantised";
    }
  }
}

// Operands at the ends of their ranges, where u8 x s8 pairs added in saturating 16-bit sums
// (vpmaddubsw, oneDNN's products on a CPU without VNNI) would overflow with 8-bit activations:
// activations at +-1 (their largest codes) against weights at +-0.5 (q = +-127) in sign patterns
// of whole rows, alternating and half-and-half, over long rows. Every operand is exact in its code,
// so the product equals the f32 product.
TEST(Int8PackedLinear, OperandsAtTheEndsOfTheirRangesDoNotSaturate) {
  const int64_t k = 256, rows = 4;
  auto pattern = [&](int64_t kind, float value) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j)
      row[static_cast<size_t>(j)] = kind == 0   ? value
                                    : kind == 1 ? -value
                                    : kind == 2 ? (j % 2 ? -value : value)
                                                : (j < k / 2 ? value : -value);
    return row;
  };
  std::vector<float> x, w;
  for (int64_t kind = 0; kind < rows; ++kind) {
    const auto xr = pattern(kind, 1.0f), wr = pattern(kind, 0.5f);
    x.insert(x.end(), xr.begin(), xr.end());
    w.insert(w.end(), wr.begin(), wr.end());
  }
  const cpu::PackedWeight packed(w.data(), rows, k, DType::i8);
  std::vector<float> y(static_cast<size_t>(rows * rows));
  cpu::packed_linear(x.data(), rows, packed, nullptr, y.data());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < rows; ++j) {
      double want = 0;
      for (int64_t t = 0; t < k; ++t)
        want += double{x[static_cast<size_t>(i * k + t)]} * w[static_cast<size_t>(j * k + t)];
      EXPECT_NEAR(y[static_cast<size_t>(i * rows + j)], want, 1e-4)
          << "x pattern " << i << ", w pattern " << j;
    }
  EXPECT_FLOAT_EQ(y[0], 128.0f);  // 256 x 1 x 0.5: the all-positive pair, the largest sums
}

// ops::linear and linear_relu with an i8 packed weight, in either float precision of the rest of
// the model: the same numbers as the kernel (the activations are quantised from f32 either way).
TEST(Int8PackedLinear, OpsLinearMultipliesWithTheInt8Weight) {
  std::mt19937 rng(72);
  const int64_t m = 6, n = 40, k = 24;
  const auto x = floats_of(random_values(m * k, rng));
  const auto w = floats_of(random_values(n * k, rng));
  const auto b = floats_of(random_values(n, rng));
  const Tensor xt = Tensor::from_floats({2, 3, k}, x), wt = Tensor::from_floats({n, k}, w),
               bt = Tensor::from_floats({n}, b);
  const auto packed = ops::pack_weight(wt, DType::i8);
  EXPECT_EQ(packed->dtype(), DType::i8);
  for (bool relu : {false, true}) {
    const std::vector<double> want = quantised_product(x, w, b, m, n, k, relu);
    for (DType precision : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(fmt::format("relu {} {}", relu, dtype_name(precision)));
      const Tensor y = relu ? ops::linear_relu(xt, wt, bt, {precision, packed.get()})
                            : ops::linear(xt, wt, bt, {precision, packed.get()});
      EXPECT_EQ(y.shape(), Shape({2, 3, n}));
      EXPECT_LT(relative_difference(y.to_floats(), want), 1e-6);
    }
  }
}

// The output layer over int8 blocks of the embedding: the log-softmax's top tokens of the int8
// logits (computed here from the quantised arithmetic), hidden quantised once for every block.
TEST(Int8PackedLinear, LogSoftmaxTopOverInt8Blocks) {
  std::mt19937 rng(73);
  const int64_t rows = 5, d = 48, vocab = 70, block = 16, m = 4;
  const auto hidden = floats_of(random_values(rows * d, rng, -2, 2));
  const auto embedding = floats_of(random_values(vocab * d, rng));
  std::vector<std::unique_ptr<cpu::PackedWeight>> blocks;
  std::vector<const kernels::PackedForm*> pointers;
  for (int64_t first = 0; first < vocab; first += block) {
    const int64_t n = std::min(block, vocab - first);
    blocks.push_back(
        std::make_unique<cpu::PackedWeight>(embedding.data() + first * d, n, d, DType::i8));
    pointers.push_back(blocks.back().get());
  }
  cpu::LogSoftmaxTopArgs args;
  args.hidden = hidden.data();
  args.rows = rows;
  args.d = d;
  args.vocab = vocab;
  args.block = block;
  args.packed_blocks = pointers.data();
  args.m = m;
  std::vector<float> values(rows * m);
  std::vector<int32_t> tokens(rows * m), counts(rows);
  cpu::log_softmax_top(args, values.data(), tokens.data(), counts.data());

  // Weights are quantised per row, so a block's rows quantise as the whole embedding's.
  const std::vector<double> logits =
      quantised_product(hidden, embedding, {}, rows, vocab, d, false);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<std::pair<double, int32_t>> row;
    double norm = 0;
    for (int32_t t = 0; t < vocab; ++t) {
      row.emplace_back(logits[static_cast<size_t>(r * vocab + t)], t);
      norm += std::exp(row.back().first);
    }
    std::sort(row.begin(), row.end(), [](auto a, auto b) { return a.first > b.first; });
    EXPECT_EQ(counts[static_cast<size_t>(r)], m);
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(tokens[static_cast<size_t>(r * m + i)], row[static_cast<size_t>(i)].second);
      EXPECT_NEAR(values[static_cast<size_t>(r * m + i)],
                  row[static_cast<size_t>(i)].first - std::log(norm), 1e-4);
    }
  }
}

TEST(Int8Decoding, PrecisionNames) {
  decode::InferenceOptions options;
  decode::parse_inference_precision("int8", "--precision", options);
  EXPECT_TRUE(options.int8);
  EXPECT_EQ(options.precision, DType::f32);
  EXPECT_EQ(decode::precision_name(options), "int8");
  decode::parse_inference_precision("int8-bf16", "--precision", options);
  EXPECT_TRUE(options.int8);
  EXPECT_EQ(options.precision, DType::bf16);
  EXPECT_EQ(decode::precision_name(options), "int8-bf16");
  decode::parse_inference_precision("bf16", "--precision", options);
  EXPECT_FALSE(options.int8);
  EXPECT_EQ(decode::precision_name(options), "bf16");
  testing::expect_error(
      [&] { decode::parse_inference_precision("int4", "--precision", options); },
      {"--precision: 'int4' is not a precision (f32, bf16, auto, int8 or int8-bf16)"});
}

// Whole translations of a small random model: int8 gives the same output as f32 for most
// sentences (random weights have near-ties, which quantisation may break the other way), and
// sentences with the same output have close scores.
TEST(Int8Decoding, TranslationsAgreeWithF32) {
  ModelConfig config = testing::tiny_decoder_config();
  config.d_model = 64;
  config.d_ff = 128;
  config.heads = 4;
  config.d_k = 16;
  config.d_v = 16;
  config.vocab_size = 300;
  nn::Transformer model(config);
  model.init(74);
  std::vector<int> lengths;
  for (int i = 0; i < 24; ++i) lengths.push_back(3 + i % 9);
  auto sources = testing::random_sources(lengths, static_cast<int32_t>(config.vocab_size), 75);
  for (DType rest : {DType::f32, DType::bf16}) {
    const decode::InferenceModel int8(model, {rest, Device::cpu, true});
    EXPECT_TRUE(int8.int8());
    EXPECT_EQ(int8.output_blocks().front()->dtype(), DType::i8);
    for (int64_t beam : {1, 4}) {
      SCOPED_TRACE(fmt::format("beam {}, the rest in {}", beam, dtype_name(rest)));
      decode::TranslateOptions options;
      options.beam_size = beam;
      options.max_length_offset = 6;
      options.batch_size = 8;
      auto want = decode::translate(model, sources, options);
      auto got = decode::translate(int8, sources, options);
      const auto [same, tokens, same_tokens, score_change] = testing::agreement(got, want);
      // (Seen: 20-23 of 24 sentences, 89-100% of the tokens, scores within 1.3%.)
      EXPECT_GE(same, 18) << "of 24 sentences";
      EXPECT_GE(same_tokens, tokens * 8 / 10) << "of " << tokens << " tokens";
      // A product moves by about 1% of its scale at most (EqualsTheQuantisedArithmetic); a score
      // sums log-probabilities of several units a token, and moves by a few percent at most.
      EXPECT_LT(score_change, 0.05) << "largest relative change of a score";
      EXPECT_GT(score_change, 0.0);
    }
  }
}

}  // namespace
}  // namespace tfm::internal
