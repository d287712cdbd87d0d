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

namespace tfm::cpu {

// One matrix operand: element (i, j) at data[i * row_stride + j * col_stride].
struct StridedMatrix {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// c [m, n] (row-major, rows ldc apart) = a [m, k] b [k, n] + bias [n] (when given) + c (when
// accumulate), then max(0, c) (when relu). a and b each need a unit stride in one of their two
// dims. Runs on the calling thread alone inside an OpenMP parallel region, else on all threads.
// Needs blocked_gemm_available().
void blocked_gemm_f32(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                      const float* bias, bool accumulate, bool relu, float* c, int64_t ldc);

// Whether this build has the kernel (AVX-512; the portable build has not).
bool blocked_gemm_available();

// Whether cpu::gemm should take the kernel for an m x k x n product: the kernel is available,
// enabled (below), and the product is large enough for its packing to pay (measured with
// gemm_bench's blocked_gemm_f32 cases).
bool blocked_gemm_applies(int64_t m, int64_t n, int64_t k);

// Turns the kernel off (oneDNN's products throughout) or on again. On by default unless the
// environment has TFM_CPU_GEMM=onednn; gemm_bench and bench_train_step compare the two this way.
void set_blocked_gemm_enabled(bool enabled);
bool blocked_gemm_enabled();

}  // namespace tfm::cpu
