// Strided batched matrix products on cuBLASLt, with the CPU's product description
// (kernels/cpu/matmul_cpu.h: GemmArgs, GemmOperand), whose pointers here are device addresses.
#pragma once

#include "tfm/kernels/cpu/matmul_cpu.h"

namespace tfm::cuda {

// c = a @ b (+ bias) (+ c when accumulate), relu last; as cpu::gemm. Operands: f32, or bf16 a and
// b with an f32 (or bf16) c, accumulating in f32. Each matrix must have one unit stride (row- or
// column-major, which covers every transposed view); a rank-4 operand's two batch dimensions must
// fold into one stride. f32 products are exact f32 unless set_tf32(true).
void gemm(const cpu::GemmArgs& args);

// Whether f32 products may round their operands to tf32 on the tensor cores (about 8x faster on
// Hopper, ~1e-3 relative error). Off by default: results then match the CPU's to f32 rounding.
void set_tf32(bool enabled);
bool tf32();

}  // namespace tfm::cuda
