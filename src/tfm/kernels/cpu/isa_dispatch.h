// CPU dispatch: the kernel sets this build has (kernels/cpu/isa.h) and the one a process uses,
// chosen once from cpuid when the CPU backend is first asked for (docs/ARCHITECTURE.md, "CPU
// dispatch"). The rest of the library reaches the CPU kernels through dispatched_kernel_table()
// and cpu_dispatch().kernels, never through a kernel set's own functions.
//
// The levels, lowest first; each needs the CPU features of the one before it as well:
//   x86-64-v2    SSE4.2, POPCNT, SSSE3 (the lowest: oneDNN needs SSE4.1)
//   avx2         x86-64-v3: AVX2, FMA, BMI2, F16C
//   avx512       x86-64-v4: AVX512F, BW, CD, DQ, VL
//   avx512-bf16  AVX512-BF16 and AVX512-VNNI (Intel Cooper Lake and later, AMD Zen 4)
//   amx          AMX tiles for bf16 and int8 (Intel Sapphire Rapids and later)
// The process takes the highest level its CPU and OS support; TFM_CPU_ISA=<level> in the
// environment takes a lower one. A level also caps oneDNN's instruction set
// (dnnl::set_max_cpu_isa) when it is forced, so that a forced avx2 runs every product as an AVX2
// machine would. amx runs the avx512-bf16 kernels: our own code has no AMX instruction, AMX
// products are oneDNN's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tfm/kernels/kernel_table.h"

namespace tfm::internal::cpu {

// What one kernel set gives the rest of the library: its kernel table, and the facts about its
// bf16 products that `precision: auto` and the messages need (blocked_gemm_cpu.h, matmul_cpu.h).
struct IsaKernels {
  const kernels::KernelTable& (*kernel_table)() = nullptr;
  double (*vdpbf16ps_to_fma_rate)() = nullptr;
  bool (*onednn_multiplies_bf16)() = nullptr;
  bool (*bf16_products_widened)() = nullptr;
  bool (*onednn_uses_amx)() = nullptr;
  // How the blocked products split between the threads (thread_shares.h): "measured" or "even";
  // "" where the set has no blocked products.
  const char* (*product_split)() = nullptr;
  // Which int8 products run in which kernel (packed_matmul_cpu.h), a sentence.
  std::string (*int8_products)() = nullptr;
};

// One level this build can run, and whether this CPU can.
struct IsaLevel {
  std::string name;        // TFM_CPU_ISA's value: "avx2"
  std::string kernel_set;  // the kernels' namespace: "avx2"; "avx512_bf16" for amx
  std::string compiled;    // the kernels' compiler flags: "-march=x86-64-v3"
  bool supported = false;  // by this CPU and OS
  std::string missing;     // where not: the features it lacks, "avx512bw avx512vl"
};

struct CpuDispatch {
  std::vector<IsaLevel> levels;         // lowest first
  size_t chosen = 0;                    // index into levels
  std::string reason;                   // why the chosen one
  std::string onednn_cap;               // oneDNN's instruction set as capped, "" when not capped
  const IsaKernels* kernels = nullptr;  // the chosen level's

  const IsaLevel& level() const { return levels[chosen]; }
};

// Chosen at the first call (thread-safe); an unknown TFM_CPU_ISA, or a level this CPU lacks, is an
// Error naming the variable, the value and the levels this CPU has.
const CpuDispatch& cpu_dispatch();

// The chosen kernel set's table: the CPU backend's (kernels/registry.cc).
const kernels::KernelTable& dispatched_kernel_table();

// `tfm info --cpu`'s lines: the CPU, each level (supported or the features it lacks), the one in
// use and why, and oneDNN's instruction set.
std::string describe_cpu_dispatch();

}  // namespace tfm::internal::cpu
