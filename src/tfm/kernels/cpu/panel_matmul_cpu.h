// Our own f32 product for decoding's products of very few rows, y = x W^T, on the weight oneDNN
// packed.
//
// Decoding one sentence multiplies 1 row (greedy) or 4 (beam 4) with every weight at each step.
// Such a product reads each weight once for a handful of multiply-adds, so its time is the time the
// weights take to arrive plus the fixed cost of the call; oneDNN 2.6's brgemm spends about as long
// again in its set-up and threading on the 512 x 512 projections (gemm_bench's packed_linear_f32
// measures it). This kernel streams each 64-column panel of the weight once, keeps a slice of it
// in the caches while every row of x passes over it (256 deep in L2; 64 deep in L1 for up to 18
// rows), and adds the bias and ReLU as it stores. cpu::packed_linear takes it for up to 128 rows
// (measured there): with the weights streaming in from memory, as in a decoding step, its
// prefetching into L2 makes it faster than oneDNN's brgemm up to 128 rows (panel_matmul_cpu.cc).
//
// The weight is read in oneDNN's f32 layout BA16a64b of W^T [k, n] (cpu::PackedWeight, packed once
// at load): n in panels of 64 columns, each panel [kp][64] row-major (kp = k rounded up to 16,
// zero rows beyond k), panel p at p * kp * 64. PackedWeight checks that oneDNN chose this layout;
// with another (another CPU, another oneDNN) the products stay oneDNN's.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The panels' column count and the rounding of k in the layout above.
constexpr int64_t kPanelColumns = 64;
constexpr int64_t kPanelDepthBlock = 16;

// Whether this build has the kernel (AVX-512; the portable build has not).
bool panel_kernel_available();

// y [m, n] (row-major, f32) = x [m, k] (row-major, f32) W^T (+ bias [n]), then `post` (max(0, y),
// swish16 or gelu16) in the stores; `panels` is W^T in the layout above. Runs on the calling thread
// alone inside an OpenMP parallel region, else on all threads. Needs panel_kernel_available().
void panel_linear_f32(const float* x, int64_t m, int64_t n, int64_t k, const float* panels,
                      const float* bias, kernels::PostOp post, float* y);

// One weight of panel_linears_f32: y [m, n] = x W^T (+ bias) from `panels` (the layout above).
struct PanelLinearF32 {
  const float* panels = nullptr;
  int64_t n = 0;
  const float* bias = nullptr;  // or null
  float* y = nullptr;
};

// panel_linear_f32 for up to 4 weights of the same depth k on the same x, in one parallel region:
// their panels one after the other, shared out among the threads as one product's (a decoding
// step's self-attention projections: one fork and join instead of three). No post-op.
void panel_linears_f32(const float* x, int64_t m, int64_t k, const PanelLinearF32* products,
                       int count);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
