// Our own int8 product for the products of few rows: decoding's.
//
// The kernel reads a weight packed in panels of 64 columns, each [groups][64][4]: the 4
// consecutive k of a column together (zero beyond k), the operand order of vpmaddubsw and
// vpdpbusd. A row's 4 activations are broadcast as one 32-bit word, and per 16 columns
//   with AVX512-VNNI:  acc = vpdpbusd(acc, u, w)   (the four u8 x s8 products summed into s32)
//   without:           t = vpmaddubsw(u, w)        (u8 x s8 pairs added into s16)
//                      acc += vpmaddwd(t, 1)       (the two s16 added into s32)
// Without VNNI the activations take 7 bits (quantize_cpu.h: u in [1, 127]), which keeps every
// pair within 2 x 127 x 127 = 32258 < 32767; either way the s32 sums are exact: the same integers
// as oneDNN's.
//
// Where the panels come from:
// - With VNNI, oneDNN packs an s8 weight as BA16a64b4a: the same panels with k in blocks of
//   16 x 4 = 64 (onednn_int8_panel_groups: up to 15 more groups of zeros). The kernel reads
//   oneDNN's copy.
// - Without, oneDNN 2.6 multiplies u8 x s8 with `gemm:jit` on a weight in plain row order, which it
//   packs again in every call (docs/journal/2026-11-26-panel-kernel-int8-without-vnni.md):
//   pack_int8_panels makes our own copy, once at load.
// panel_linear_u8s8 dequantises in the same pass, from the sums in registers: dequantize_product's
// arithmetic, lane for lane, without a second pass over the s32 product.
// cpu::packed_linear_quantized takes it for few rows (packed_matmul_cpu.cc: up to 128 with VNNI,
// kVnniPanelMaxRows; 64 without, kInt8PanelMaxRows; the measurements:
// docs/journal/2026-12-04-int8-panels-with-vnni.md).
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The panels' column count and the k values of a column stored together.
constexpr int64_t kInt8PanelColumns = 64;
constexpr int64_t kInt8PanelGroup = 4;

// Whether this build has the kernel (AVX512BW; the portable build has not).
bool int8_panel_kernel_available();

// The 4-k groups of a panel: as pack_int8_panels lays them out (k rounded up to 4), and as oneDNN's
// BA16a64b4a layout does (k rounded up to 64).
int64_t int8_panel_groups(int64_t k);
int64_t onednn_int8_panel_groups(int64_t k);

// Bytes of the packed weight of W [n, k] (pack_int8_panels).
int64_t int8_panel_bytes(int64_t n, int64_t k);

// Whether the kernel's sums are exact for activations quantised with this zero point
// (quantize_cpu.h): any, in a build with AVX512-VNNI; the 7-bit ones (kSaturatingZeroPoint)
// without.
bool int8_panel_kernel_exact_for(int32_t zero_point);

// Packs q, W's s8 rows [n, k] (row-major), into `panels` (int8_panel_bytes(n, k) bytes).
void pack_int8_panels(const int8_t* q, int64_t n, int64_t k, int8_t* panels);

// acc [m, n] (s32, row-major) = u [m, k] (u8, row-major, every value <= 127 unless the build has
// AVX512-VNNI) W^T, W in panels of panel_groups groups (int8_panel_groups(k) for pack_int8_panels',
// onednn_int8_panel_groups(k) for oneDNN's). Runs on the calling thread alone inside an OpenMP
// parallel region, else on all threads. Needs int8_panel_kernel_available().
void panel_product_u8s8(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                        int64_t panel_groups, int32_t* acc);

// What dequantize_product needs besides the s32 product (the same meanings).
struct Int8Epilogue {
  const float* x_scales = nullptr;      // [m]
  const float* w_scales = nullptr;      // [n]
  const int32_t* w_row_sums = nullptr;  // [n]
  const float* bias = nullptr;          // [n] or null
  kernels::PostOp post = kernels::PostOp::none;
  int32_t zero_point = 0;  // u's: kNativeZeroPoint or kSaturatingZeroPoint
};

// y [m, n] (f32) = dequantize_product(panel_product_u8s8(...)) with the same bits, in one pass.
// Needs int8_panel_kernel_exact_for(e.zero_point).
void panel_linear_u8s8(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                       int64_t panel_groups, const Int8Epilogue& e, float* y);

// panel_linear_u8s8 on x [m, k] (f32) quantised as quantize_rows_u8 does with e.zero_point, into
// u [m, k] and x_scales [m] (e.x_scales is not read), by the product's own threads: each
// quantises its share of the rows, then they wait for each other and multiply, one parallel
// region in all. The same bits as quantize_rows_u8 followed by panel_linear_u8s8.
void panel_linear_quantising(const float* x, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                             int64_t panel_groups, Int8Epilogue e, uint8_t* u, float* x_scales,
                             float* y);

// One weight of panel_linears_quantising: its panels (n columns), its epilogue (e.x_scales is not
// read) and y [m, n].
struct Int8PanelLinear {
  const int8_t* panels = nullptr;
  int64_t n = 0;
  Int8Epilogue e;
  float* y = nullptr;
};

// panel_linear_quantising for 1 to 4 weights of the same depth k (and panel_groups) on the same x,
// with one zero point: x quantised once, and the weights' panels shared among the threads of one
// parallel region. The same bits as one panel_linear_quantising a weight.
void panel_linears_quantising(const float* x, int64_t m, int64_t k, int64_t panel_groups,
                              const Int8PanelLinear* products, int count, uint8_t* u,
                              float* x_scales);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
