// The instruction set that this translation unit's CPU kernels are compiled for, as the name of the
// inline namespace that holds them (docs/ARCHITECTURE.md, "CPU dispatch").
//
// The default build compiles every file of kernels/cpu/ (but isa_dispatch.cc) once per kernel set,
// each with its own -march (CMakeLists.txt, TFM_CPU_KERNEL_SETS); the set's compiler macros name
// its namespace here, so the same source gives tfm::internal::cpu::avx2::softmax and
// tfm::internal::cpu::avx512_bf16::softmax side by side in one binary, and a call written
// cpu::softmax inside a set reaches that set's own function. isa_dispatch.cc chooses one set when
// the process starts. A build with TFM_NATIVE=ON compiles one set, for -march=native.
//
// Outside kernels/cpu/ only isa_dispatch.h is included (tests/test_layering.cc): a file of the
// library compiled for the baseline x86-64 would otherwise name the x86-64-v2 set. The tests and
// the benchmarks, compiled with -march=native, name the set that the dispatch chooses on the
// machine that built them.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&    \
    defined(__AVX512DQ__) && defined(__AVX512CD__) && defined(__AVX512BF16__) && \
    defined(__AVX512VNNI__)
#define TFM_CPU_ISA avx512_bf16
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__AVX512CD__)
#define TFM_CPU_ISA avx512
#elif defined(__AVX2__) && defined(__FMA__)
#define TFM_CPU_ISA avx2
#else
#define TFM_CPU_ISA x86_64_v2
#endif

// The set's name as a string: "avx2".
#define TFM_CPU_ISA_QUOTE(name) #name
#define TFM_CPU_ISA_STRING(name) TFM_CPU_ISA_QUOTE(name)
#define TFM_CPU_ISA_NAME TFM_CPU_ISA_STRING(TFM_CPU_ISA)
