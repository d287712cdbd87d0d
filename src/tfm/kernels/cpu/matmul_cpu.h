// Strided batched matrix products on oneDNN's matmul primitive.
//
// Every operand is described by explicit dims and element strides, so transposes and per-head views
// of [B, T, h*d] activations cost no copies: head i's q is the 4-D view [B, h, T, dk] with strides
// {T*h*dk, dk, h*dk, 1} starting at q's first element. oneDNN primitives are created once per
// distinct descriptor and kept in a process-wide cache.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// The product's operands and arguments (kernels/kernel_args.h).
using kernels::GemmArgs;
using kernels::GemmOperand;
using kernels::kMaxGemmRank;

void gemm(const GemmArgs& args);

// KernelTable::relu_backward_product_bf16: c = (a @ b where relu_mask > 0, else 0) rounded to bf16
// and db (+)= the masked values' column sums, with the bits of gemm into an f32 c followed by
// relu_backward_bias_from_bf16 (our vdpbf16ps kernel does it in its tiles' stores where it takes
// the product; elsewhere those two run). Counted among the products (gemm_stats).
void relu_backward_product_bf16(const GemmArgs& args, const bf16* relu_mask, float* db,
                                bool accumulate_db);

// Whether oneDNN multiplies bf16 operands on this CPU (its bf16 products need AVX-512; an AVX2-only
// CPU such as AMD Zen 3 has none). Where it does not, gemm and packed weights widen bf16 operands
// to f32 (exactly: a bf16 is the high half of an f32) and multiply in f32: the same products,
// summed in f32. Asked once.
bool onednn_multiplies_bf16();

// Number of oneDNN primitives currently cached (for tests and diagnostics).
size_t gemm_cache_size();
// Number of oneDNN primitives made since the start: each cache miss makes one.
int64_t gemm_primitives_made();

// Accounting of every gemm call since the start or the last reset_gemm_stats(), always on: two
// steady_clock reads and three relaxed atomic additions per call, negligible beside a product.
// `seconds` is wall time inside gemm (primitive lookup, creation on a cache miss, and the product);
// `flops` counts 2*M*N*K per matrix of the batch (zero for an empty product).
struct GemmStats {
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
};

GemmStats gemm_stats();
void reset_gemm_stats();
// The same accounting per kind of product, off until set_gemm_shape_stats(true) (a benchmark's
// breakdown of a step's products): a mutex and a text key per call while on. A kind is the
// precision, M x N x K, the batch of matrices, whether a and b are transposed (T) or not (N), and
// whether c is added to: "bf16 1024x8000x128 N T", "f32 16x16x32 x256 N T +=".
struct GemmShapeStats {
  std::string shape;
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
};
void set_gemm_shape_stats(bool on);  // and forgets what was counted
// The kinds counted since, the most seconds first.
std::vector<GemmShapeStats> gemm_shape_stats();

// Adds a product done outside gemm (the packed inference products of packed_matmul_cpu.h). Inside
// a parallel region each thread counts seconds / threads. `kind` names it in gemm_shape_stats()
// (computed only while they are on).
void record_gemm(double seconds, double flops, const std::function<std::string()>& kind = {});

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
