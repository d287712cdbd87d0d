// Our own f32 product for training's large products, c = a b (+ bias) (+ c) (ReLU), in the BLIS
// style: b packed in blocks of 256 x 512 and a in blocks of 84 x 256, both cut into micro-panels
// laid out in the order the micro-kernel reads them; the micro-kernel keeps a 14 x 32 tile of c in
// 28 of the 32 AVX-512 registers while a 14-row micro-panel of a stays in L1 and b's block streams
// from L2. Packing reads a and b in either layout (row- or
// column-major: the forward's x W^T, the input gradient's g W and the weight gradient's g^T x).
//
// Why: oneDNN 2.6's brgemm ran a base training step's products below the 85% of the FMA peak that
// issue 19 asks for (docs/journal/2026-11-27-blocked-f32-kernel.md). cpu::gemm takes this kernel
// for the shapes where it was measured faster (blocked_gemm_applies) and oneDNN's matmul otherwise.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

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

// cpu::gemm has the threads split a product's sum instead of its c (each thread sums its share of
// the inner dimension with these kernels, and the shares are added) where c has at most this many
// elements and the sum at least 512 terms a thread: the weight gradients of a d_model x d_model
// projection up to d_model 512, summed over a batch's tokens, and the output layer's input
// gradient of a block of 512 tokens, summed over the vocabulary. Each thread then packs half of a
// and half of b, not all of a and half of b (base's 512 x 512 x 4096 weight gradients 1.15-1.25x
// in f32; docs/journal/2026-12-03-split-sums-smaller-a-blocks.md).
inline constexpr int64_t kSplitSumMostOutput = int64_t{1} << 18;

// The same product with bf16 a and b (an f32 c, bias and sums): our AVX512-BF16 kernel, the same
// blocking with each 32-bit element of a packed micro-panel a pair of bf16 along the depth, the
// order vdpbf16ps multiplies them in: c's 14 x 32 tile gains two depths per instruction, each
// product of two bf16 exact in f32 and added with f32 rounding. (Denormal operands and sums are
// flushed to zero, as vdpbf16ps does, and as oneDNN's bf16 products on such a CPU do.)
// Why: oneDNN 2.6's bf16 products ran a base step's products well below the EPYC's vdpbf16ps peak
// (issue 19; docs/journal/2026-11-22-cpu-performance-suite.md). Needs
// blocked_gemm_bf16_available().
void blocked_gemm_bf16(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a, StridedBf16Matrix b,
                       const float* bias, bool accumulate, bool relu, float* c, int64_t ldc);

// blocked_gemm_bf16 without accumulation whose c is bf16: each element the f32 result (bias and
// ReLU included) rounded as f32_to_bf16, in the tile's store, so that no f32 c is written and read
// again. For k up to blocked_gemm_bf16_rounded_most_depth() (one depth block: each tile's sum is
// whole when it is stored); 0 where this build has no such kernel. The bits equal
// blocked_gemm_bf16 into an f32 c followed by f32_to_bf16.
void blocked_gemm_bf16_rounded(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a,
                               StridedBf16Matrix b, const float* bias, bool relu, bf16* c,
                               int64_t ldc);
int64_t blocked_gemm_bf16_rounded_most_depth();

// ReLU's backward through the product that makes its incoming gradient, under bf16 products: for
// d = a b (bf16 operands, f32 sums, k up to blocked_gemm_bf16_rounded_most_depth()), c = d where
// relu_mask > 0 (relu_mask: the ReLU's bf16 output, [m, n] rows ldc apart, as c), else 0, rounded
// to bf16, and column_sums [n] (+)= the column sums of those masked f32 values, each column's rows
// added in order (when column_sums is not null). The bits equal blocked_gemm_bf16 into an f32 d
// followed by relu_backward_bias_from_bf16.
void blocked_gemm_bf16_relu_backward(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a,
                                     StridedBf16Matrix b, const bf16* relu_mask, bf16* c,
                                     int64_t ldc, float* column_sums, bool accumulate_sums);

// Whether this build has the bf16 kernel (compiled for a CPU with AVX512-BF16).
bool blocked_gemm_bf16_available();

// The same product with bf16 a and b widened to f32 as they are packed, then the f32 kernel's
// multiply-adds: the same products (each product of two bf16 is exact in f32) summed in f32. Why:
// on a CPU whose vdpbf16ps does no more multiply-adds a cycle than its FMA (an Intel Xeon without
// AMX: half as many), oneDNN's bf16 products are held to vdpbf16ps's rate, about half of what the
// FMA gives f32 (docs/journal/2026-11-27-xeon-bf16-widened.md). Needs blocked_gemm_available().
void blocked_gemm_bf16_widened(int64_t m, int64_t n, int64_t k, StridedBf16Matrix a,
                               StridedBf16Matrix b, const float* bias, bool accumulate, bool relu,
                               float* c, int64_t ldc);

// Which kernel multiplies cpu::gemm's large bf16 products (a bf16 a and b, an f32 c).
enum class Bf16Products {
  onednn,   // oneDNN's matmul (vdpbf16ps, or AMX's tile products where the CPU has them)
  dot,      // blocked_gemm_bf16 (vdpbf16ps)
  widened,  // blocked_gemm_bf16_widened (FMA)
};

// The choice in force. By default: `widened` where oneDNN has no AMX and a measurement at the
// first call finds this core's vdpbf16ps doing at most as many multiply-adds a second as its FMA
// (vdpbf16ps_to_fma_rate() <= 1), else `onednn`; TFM_CPU_GEMM_BF16=onednn|dot|widened in the
// environment chooses (TFM_CPU_GEMM=ours: `dot`, as before). A kernel this build lacks falls back
// to oneDNN.
Bf16Products bf16_products();
void set_bf16_products(Bf16Products choice);
const char* bf16_products_name(Bf16Products choice);

// Whether bf16 products other than cpu::gemm's (decoding's packed weights, packed_matmul_cpu.h)
// should be widened to f32 as well: Bf16Products::widened is chosen, the f32 kernels are available
// and enabled, and oneDNN has no AMX.
bool bf16_products_widened();

// Multiply-adds a second of vdpbf16ps over those of the f32 FMA on one core of this CPU (each
// measured with 12 independent sums, the best of several tries): 0.5 on an Intel Xeon without AMX,
// 2 on AMD Zen 4. 0 where this build has no AVX512-BF16. Measured once.
double vdpbf16ps_to_fma_rate();

// Whether cpu::gemm takes one of our kernels for an m x k x n bf16 product: the chosen one is
// ours and available, the kernels are enabled (set_blocked_gemm_enabled), the product large enough
// (the vdpbf16ps kernel: blocked_gemm_large_enough; the widening one: every dim at least 128), and
// oneDNN without AMX (whose tile products pass any vector kernel).
bool blocked_gemm_bf16_applies(int64_t m, int64_t n, int64_t k);

// Whether oneDNN's effective ISA here has AMX (a CPU with AMX, unless ONEDNN_MAX_CPU_ISA lowers
// it).
bool onednn_uses_amx();

// The value of the environment variable `name` where it is one of `valid`, else null. Another value
// (a typo) is ignored with one line on stderr, as libgomp does with its variables: it is read at a
// process's first product, which may run inside an OpenMP region that no error can leave.
const char* environment_choice(const char* name, std::initializer_list<const char*> valid);

// Turns the kernels off (oneDNN's products throughout) or on again. On by default unless the
// environment has TFM_CPU_GEMM=onednn; gemm_bench and bench_train_step compare the two this way.
void set_blocked_gemm_enabled(bool enabled);
bool blocked_gemm_enabled();

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
