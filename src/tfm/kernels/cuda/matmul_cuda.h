// Strided batched matrix products on cuBLASLt, with the CPU's product description
// (kernels/cpu/matmul_cpu.h: GemmArgs, GemmOperand), whose pointers here are device addresses.
#pragma once

#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cuda {

// c = a @ b (+ bias) (+ c when accumulate), relu last; as cpu::gemm. Operands: f32, or bf16 a and
// b with an f32 (or bf16) c, accumulating in f32. Each matrix must have one unit stride (row- or
// column-major, which covers every transposed view). Rank-4 operands whose two batch dimensions do
// not fold into one stride (per-head views) run as one batched product per index of the second.
// Pointers need only the element's alignment. f32 products are exact f32 unless set_tf32(true) and
// allow_tf32 (false: exact whatever the setting, as attention's products, which the tests compare
// with the CPU).
void gemm(const kernels::GemmArgs& args, bool allow_tf32 = true);

// Whether f32 products may round their operands to tf32 on the tensor cores (about 8x faster on
// Hopper, ~1e-3 relative error). Off by default: results then match the CPU's to f32 rounding.
void set_tf32(bool enabled);
bool tf32();

}  // namespace tfm::internal::cuda
