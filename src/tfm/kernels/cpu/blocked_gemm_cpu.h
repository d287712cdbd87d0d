// Our own f32 product for training's large products, c = a b (+ bias) (+ c) (ReLU), in the BLIS
// style: b packed in blocks of 256 x 512 and a in blocks of 336 x 256, both cut into micro-panels
// laid out in the order the micro-kernel reads them; the micro-kernel keeps a 14 x 32 tile of c in
// 28 of the 32 AVX-512 registers while a 14-row micro-panel of a stays in L1 and b's block streams
// from L2. Packing reads a and b in either layout (row- or
// column-major: the forward's x W^T, the input gradient's g W and the weight gradient's g^T x).
//
// Why: oneDNN 2.6's brgemm ran a base training step's products at 68-81% of this machine's FMA
// peak, below the 85% issue 19 asks for (docs/BENCHMARKS.md). cpu::gemm takes this kernel for
// the shapes where it was measured faster (blocked_gemm_applies) and oneDNN's matmul otherwise.
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"

namespace tfm::cpu {

// One matrix operand: element (i, j) at data[i * row_stride + j * col_stride].
template <class T>
struct Strided {
  const T* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};
using StridedMatrix = Strided<float>;
using StridedBf16Matrix = Strided<bf16>;

// c [m, n] (row-major, rows ldc apart) = a [m, k] b [k, n] + bias [n] (when given) + c (when
// accumulate), then max(0, c) (when relu). a and b each need a unit stride in one of their two
// dims. Runs on the calling thread alone inside an OpenMP parallel region, else on all threads.
// Needs blocked_gemm_available().
void blocked_gemm_f32(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                      const float* bias, bool accumulate, bool relu, float* c, int64_t ldc);

// Whether this build has the kernel (AVX-512; the portable build has not).
bool blocked_gemm_available();

// Whether an m x k x n product is large enough for the packing to pay (measured with gemm_bench's
// training_product_f32 cases).
bool blocked_gemm_large_enough(int64_t m, int64_t n, int64_t k);

// Whether cpu::gemm should take the kernel for an m x k x n f32 product: the kernel is available,
// enabled (below), and the product large enough.
bool blocked_gemm_applies(int64_t m, int64_t n, int64_t k);

// The same product with bf16 a and b (an f32 c, bias and sums): our AVX512-BF16 kernel, the same
// blocking with each 32-bit element of a packed micro-panel a pair of bf16 along the depth, the
// order vdpbf16ps multiplies them in: c's 14 x 32 tile gains two depths per instruction, each
// product of two bf16 exact in f32 and added with f32 rounding. (Denormal operands and sums are
// flushed to zero, as vdpbf16ps does, and as oneDNN's bf16 products on such a CPU do.)
// Why: oneDNN 2.6's bf16 products ran a base step's products at ~71% of the EPYC's measured
// vdpbf16ps peak (issue 19). Needs blocked_gemm_bf16_available().
void blocked_gemm_bf16(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a, StridedBf16Matrix b,
                       const float* bias, bool accumulate, bool relu, float* c, int64_t ldc);

// Whether this build has the bf16 kernel (compiled for a CPU with AVX512-BF16).
bool blocked_gemm_bf16_available();

// Whether cpu::gemm should take the bf16 kernel for an m x k x n product: available, chosen
// (below), the kernels enabled, large enough, and oneDNN without AMX (whose tile products pass
// vdpbf16ps).
bool blocked_gemm_bf16_applies(int64_t m, int64_t n, int64_t k);

// Chooses the bf16 kernel for cpu::gemm, or leaves bf16 to oneDNN: off by default, on with
// TFM_CPU_GEMM=ours in the environment. Measured so far only on a Xeon whose vdpbf16ps runs at
// half its FMA rate, where it was not faster than oneDNN (docs/BENCHMARKS.md); to be measured on
// a CPU with AVX512-BF16 and no AMX (AMD Zen 4) before it becomes the default there.
void set_blocked_gemm_bf16_enabled(bool enabled);
bool blocked_gemm_bf16_enabled();

// Whether oneDNN's effective ISA here has AMX (a CPU with AMX, unless ONEDNN_MAX_CPU_ISA lowers
// it).
bool onednn_uses_amx();

// Turns the kernels off (oneDNN's products throughout) or on again. On by default unless the
// environment has TFM_CPU_GEMM=onednn; gemm_bench and bench_train_step compare the two this way.
void set_blocked_gemm_enabled(bool enabled);
bool blocked_gemm_enabled();

}  // namespace tfm::cpu
