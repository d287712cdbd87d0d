// Our own int8 product for decoding's products of few rows on a CPU without AVX512-VNNI.
//
// There oneDNN 2.6 multiplies u8 x s8 with `gemm:jit` on a weight in plain row order, which it
// packs again in every call: one sentence decoded with int8 ran no faster than with f32
// (docs/journal/2026-11-26-panel-kernel-int8-without-vnni.md), although its weights are a quarter
// of the bytes. This kernel reads a weight packed once at load, in panels of 64 columns, each
// [kq][64][4]: the 4 consecutive k of a column together (kq = k rounded up to 4, then / 4; zero
// beyond k), the operand order of vpmaddubsw. A row's 4 activations are broadcast as one 32-bit
// word, and per 16 columns
//   t = vpmaddubsw(u, w)   (u8 x s8 pairs added into s16: exact while u <= 127, see below)
//   acc += vpmaddwd(t, 1)  (the two s16 added into s32)
// The 7-bit activations of such a CPU (quantize_cpu.h: u in [1, 127]) keep every pair within
// 2 x 127 x 127 = 32258 < 32767, so the s32 sums are exact: the same integers as oneDNN's.
// Built for a CPU with AVX512-VNNI, the kernel multiplies with vpdpbusd instead (the four products
// summed into s32 exactly, for any u8); whether it beats oneDNN's brgemm there is measured with
// gemm_bench's packed_product_i8 (docs/BENCHMARKS.md, "Kernels: gemm_bench"), and until then such a
// CPU keeps oneDNN's. cpu::packed_linear_quantized takes it for up to 64 rows (kInt8PanelMaxRows,
// packed_matmul_cpu.cc).
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The panels' column count and the k values of a column stored together.
constexpr int64_t kInt8PanelColumns = 64;
constexpr int64_t kInt8PanelGroup = 4;

// Whether this build has the kernel (AVX512BW; the portable build has not).
bool int8_panel_kernel_available();

// Bytes of the packed weight of W [n, k].
int64_t int8_panel_bytes(int64_t n, int64_t k);

// Packs q, W's s8 rows [n, k] (row-major), into `panels` (int8_panel_bytes(n, k) bytes).
void pack_int8_panels(const int8_t* q, int64_t n, int64_t k, int8_t* panels);

// acc [m, n] (s32, row-major) = u [m, k] (u8, row-major, every value <= 127 unless the build has
// AVX512-VNNI) W^T, W packed by
// pack_int8_panels. Runs on the calling thread alone inside an OpenMP parallel region, else on all
// threads. Needs int8_panel_kernel_available().
void panel_product_u8s8(const uint8_t* u, int64_t m, int64_t n, int64_t k, const int8_t* panels,
                        int32_t* acc);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
