// Strided batched matrix products on oneDNN's matmul primitive.
//
// Every operand is described by explicit dims and element strides, so transposes and per-head views
// of [B, T, h*d] activations cost no copies: head i's q is the 4-D view [B, h, T, dk] with strides
// {T*h*dk, dk, h*dk, 1} starting at q's first element. oneDNN primitives are created once per
// distinct descriptor and kept in a process-wide cache.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "tfm/core/dtype.h"

namespace tfm::cpu {

// Rank of a product's operands: [rows, cols], [batch, rows, cols] or [b0, b1, rows, cols].
inline constexpr int kMaxGemmRank = 4;

// A (batch of) matrices viewed through dims and element strides. The element type is a field so
// that bf16 operands with an f32 result need no change of interface.
struct GemmOperand {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<int64_t, kMaxGemmRank> dims{};
  std::array<int64_t, kMaxGemmRank> strides{};

  // A view with the given dims and strides (same count, 2 to kMaxGemmRank).
  static GemmOperand strided(const void* data, DType dtype, std::initializer_list<int64_t> dims,
                             std::initializer_list<int64_t> strides);
  // A row-major [..., rows, cols] block.
  static GemmOperand dense(const void* data, DType dtype, std::initializer_list<int64_t> dims);
  // The same elements seen as the transpose of each matrix: swaps the last two dims and strides.
  GemmOperand transposed() const;

  int64_t rows() const { return dims[rank - 2]; }
  int64_t cols() const { return dims[rank - 1]; }
};

// c = alpha * (a @ b + bias), or c += alpha * (a @ b + bias) when `accumulate` (oneDNN applies its
// output scale after the bias and before the sum post-op); with `relu`, c = max(c, 0) last.
//   a: [batch..., M, K], b: [batch..., K, N], c: [batch..., M, N], all of one rank; a batch dim of
//   a or b may be 1 where c's is larger (broadcast). bias: f32 [N] or nullptr.
// f32 operands give an f32 result; a and b in bf16 may give f32 or bf16.
struct GemmArgs {
  GemmOperand a;
  GemmOperand b;
  GemmOperand c;
  const float* bias = nullptr;
  float alpha = 1.0f;
  bool accumulate = false;
  bool relu = false;
};

void gemm(const GemmArgs& args);

// Whether oneDNN multiplies bf16 operands on this CPU (its bf16 products need AVX-512; an AVX2-only
// CPU such as AMD Zen 3 has none). Where it does not, gemm and packed weights widen bf16 operands
// to f32 (exactly: a bf16 is the high half of an f32) and multiply in f32: the same products,
// summed in f32. Asked once.
bool onednn_multiplies_bf16();

// Number of oneDNN primitives currently cached (for tests and diagnostics).
size_t gemm_cache_size();

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
// Adds a product done outside gemm (the packed inference products of packed_matmul_cpu.h). Inside
// a parallel region each thread counts seconds / threads.
void record_gemm(double seconds, double flops);

}  // namespace tfm::cpu
