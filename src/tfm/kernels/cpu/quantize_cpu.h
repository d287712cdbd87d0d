// int8 quantisation for the int8 inference products (packed_matmul_cpu.h).
//
// Rows are quantised symmetrically, each with its own scale s = max_j |x_j| / 127:
//   q_j = round(x_j / s) in [-127, 127],  x_j ~ s q_j.
// Weights are stored as s8 q (one scale per output row, fixed at load). Activations are quantised
// per row at every product and stored shifted to u8 (u_j = q_j + 128, in [1, 255]), the operand
// VNNI's u8 x s8 dot product (vpdpbusd) reads; the shift is undone with the weight rows' sums:
//   sum_j u_j w_j = sum_j q_j w_j + 128 sum_j w_j.
#pragma once

#include <cstdint>

namespace tfm::cpu {

inline constexpr int32_t kActivationZeroPoint = 128;

// Whether this CPU multiplies u8 x s8 without saturating (AVX512-VNNI or AMX): without VNNI,
// oneDNN's int8 products add pairs in saturating s16 (vpmaddubsw), which u8 operands up to 255
// can overflow.
bool native_int8_products();

// q [rows, cols] (s8, row-major) and scales [rows] of x [rows, cols]; an all-zero row gets scale 0
// and q = 0; a row holding a NaN gets scale NaN and q = 0, so that its products come out NaN.
void quantize_rows_s8(const float* x, int64_t rows, int64_t cols, int8_t* q, float* scales);

// u = q + 128 [rows, cols] (u8) and scales [rows] of x [rows, cols]: the activations' form.
// Runs on all threads unless called inside a parallel region.
void quantize_rows_u8(const float* x, int64_t rows, int64_t cols, uint8_t* u, float* scales);

// y [rows, n] = (acc - 128 row_sums[j]) x_scales[i] w_scales[j] + bias[j] (bias optional), then
// max(0, y) when relu. acc [rows, n] is the s32 product of u and the s8 weights; y may alias it.
void dequantize_product(const int32_t* acc, int64_t rows, int64_t n, const float* x_scales,
                        const float* w_scales, const int32_t* w_row_sums, const float* bias,
                        bool relu, float* y);

}  // namespace tfm::cpu
