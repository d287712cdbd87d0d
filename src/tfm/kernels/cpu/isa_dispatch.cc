// CPU dispatch (isa_dispatch.h). This file is compiled for the baseline x86-64, as the rest of the
// library: it only reads cpuid (GCC's __builtin_cpu_supports, which also checks that the OS saves
// the AVX and AVX-512 registers) and hands out the chosen kernel set's functions.
#include "tfm/kernels/cpu/isa_dispatch.h"

#include <cpuid.h>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <stdexcept>

#include "tfm/core/error.h"

#ifdef TFM_CPU_DISPATCH
// The kernel sets compiled into this build (CMakeLists.txt, TFM_CPU_KERNEL_SETS), each the same
// sources under its own -march; CMake defines TFM_CPU_FLAGS_<set>, the flags as a string.
namespace tfm::internal::cpu::x86_64_v2 {
const IsaKernels& isa_kernels();
}
namespace tfm::internal::cpu::avx2 {
const IsaKernels& isa_kernels();
}
namespace tfm::internal::cpu::avx512 {
const IsaKernels& isa_kernels();
}
namespace tfm::internal::cpu::avx512_bf16 {
const IsaKernels& isa_kernels();
}
#else
// TFM_NATIVE=ON: the one set, compiled for -march=native like this file.
#include "tfm/kernels/cpu/isa.h"
namespace tfm::internal::cpu::TFM_CPU_ISA {
const IsaKernels& isa_kernels();
}
#endif

namespace tfm::internal::cpu {

namespace {

#ifdef TFM_CPU_DISPATCH
struct Feature {
  const char* name;
  bool present;
};

// The features each level adds to the one below it (isa_dispatch.h's table). __builtin_cpu_supports
// takes literal names only, hence the lists.
std::vector<Feature> features_added(size_t level) {
  switch (level) {
    case 0:
      return {{"ssse3", __builtin_cpu_supports("ssse3") != 0},
              {"sse4.1", __builtin_cpu_supports("sse4.1") != 0},
              {"sse4.2", __builtin_cpu_supports("sse4.2") != 0},
              {"popcnt", __builtin_cpu_supports("popcnt") != 0}};
    case 1:
      return {{"avx2", __builtin_cpu_supports("avx2") != 0},
              {"fma", __builtin_cpu_supports("fma") != 0},
              {"bmi", __builtin_cpu_supports("bmi") != 0},
              {"bmi2", __builtin_cpu_supports("bmi2") != 0},
              {"f16c", __builtin_cpu_supports("f16c") != 0}};
    case 2:
      return {{"avx512f", __builtin_cpu_supports("avx512f") != 0},
              {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
              {"avx512cd", __builtin_cpu_supports("avx512cd") != 0},
              {"avx512dq", __builtin_cpu_supports("avx512dq") != 0},
              {"avx512vl", __builtin_cpu_supports("avx512vl") != 0}};
    case 3:
      return {{"avx512bf16", __builtin_cpu_supports("avx512bf16") != 0},
              {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0}};
    default:
      return {{"amx-tile", __builtin_cpu_supports("amx-tile") != 0},
              {"amx-bf16", __builtin_cpu_supports("amx-bf16") != 0},
              {"amx-int8", __builtin_cpu_supports("amx-int8") != 0}};
  }
}

#endif

struct LevelSpec {
  const char* name;
  const char* kernel_set;
  const char* compiled;
  const IsaKernels& (*kernels)();
  dnnl::cpu_isa onednn_cap;  // oneDNN's highest instruction set at this level
};

#ifdef TFM_CPU_DISPATCH
const std::vector<LevelSpec>& level_specs() {
  static const std::vector<LevelSpec> specs = {
      {"x86-64-v2", "x86_64_v2", TFM_CPU_FLAGS_x86_64_v2, &x86_64_v2::isa_kernels,
       dnnl::cpu_isa::sse41},
      {"avx2", "avx2", TFM_CPU_FLAGS_avx2, &avx2::isa_kernels, dnnl::cpu_isa::avx2},
      {"avx512", "avx512", TFM_CPU_FLAGS_avx512, &avx512::isa_kernels, dnnl::cpu_isa::avx512_core},
      {"avx512-bf16", "avx512_bf16", TFM_CPU_FLAGS_avx512_bf16, &avx512_bf16::isa_kernels,
       dnnl::cpu_isa::avx512_core_bf16},
      {"amx", "avx512_bf16", TFM_CPU_FLAGS_avx512_bf16, &avx512_bf16::isa_kernels,
       dnnl::cpu_isa::avx512_core_amx},
  };
  return specs;
}
#endif

std::string cpu_brand() {
  unsigned regs[12] = {};
  unsigned max_leaf = __get_cpuid_max(0x80000000u, nullptr);
  if (max_leaf < 0x80000004u) return "an x86-64 CPU";
  for (unsigned i = 0; i < 3; ++i)
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                &regs[4 * i + 3]);
  char text[49] = {};
  std::memcpy(text, regs, 48);
  std::string brand(text);
  const size_t first = brand.find_first_not_of(' ');
  return first == std::string::npos ? "an x86-64 CPU" : brand.substr(first);
}

CpuDispatch choose() {
  CpuDispatch d;
  const char* forced = std::getenv("TFM_CPU_ISA");
  if (forced != nullptr && *forced == '\0') forced = nullptr;
#ifdef TFM_CPU_DISPATCH
  const std::vector<LevelSpec>& specs = level_specs();
  std::string missing;  // the features this level and those below it lack
  for (size_t i = 0; i < specs.size(); ++i) {
    for (const Feature& f : features_added(i))
      if (!f.present) missing += fmt::format("{}{}", missing.empty() ? "" : " ", f.name);
    d.levels.push_back(
        {specs[i].name, specs[i].kernel_set, specs[i].compiled, missing.empty(), missing});
  }
  TFM_CHECK(d.levels[0].supported,
            "this CPU lacks {} (x86-64-v2), which tfm needs: the lowest level it is built for",
            d.levels[0].missing);
  size_t best = 0;
  while (best + 1 < d.levels.size() && d.levels[best + 1].supported) ++best;
  d.chosen = best;
  d.reason = "the highest level this CPU supports";
  if (forced != nullptr) {
    std::string names;
    size_t index = d.levels.size();
    for (size_t i = 0; i < d.levels.size(); ++i) {
      names += fmt::format("{}{}", i ? ", " : "", d.levels[i].name);
      if (d.levels[i].name == forced) index = i;
    }
    TFM_CHECK(index < d.levels.size(), "TFM_CPU_ISA={}: not a level (one of {})", forced, names);
    TFM_CHECK(d.levels[index].supported,
              "TFM_CPU_ISA={}: this CPU lacks {} (its highest level is {})", forced,
              d.levels[index].missing, d.levels[best].name);
    d.chosen = index;
    d.reason = fmt::format("TFM_CPU_ISA={} (the CPU's highest: {})", forced, d.levels[best].name);
    // oneDNN takes the same level, unless it has chosen already (a process that multiplied before
    // the CPU backend was first asked for: not the library's own order).
    try {
      dnnl::set_max_cpu_isa(specs[index].onednn_cap);
    } catch (const dnnl::error&) {
      fail("TFM_CPU_ISA={}: oneDNN had already chosen its instruction set", forced);
    }
    d.onednn_cap = forced;
  }
  d.kernels = &specs[d.chosen].kernels();
#else
  const std::string set = fmt::format("{}", TFM_CPU_ISA_NAME);
  d.levels.push_back({"native", set, "-march=native (TFM_NATIVE=ON)", true, ""});
  d.reason = "the only level of a TFM_NATIVE=ON build";
  TFM_CHECK(forced == nullptr || std::strcmp(forced, "native") == 0,
            "TFM_CPU_ISA={}: this build has one kernel set, for -march=native (TFM_NATIVE=ON); "
            "the default build has the levels to choose from",
            forced);
  d.kernels = &TFM_CPU_ISA::isa_kernels();
#endif
  return d;
}

const char* onednn_isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "SSE4.1";
    case dnnl::cpu_isa::avx:
      return "AVX";
    case dnnl::cpu_isa::avx2:
      return "AVX2";
    case dnnl::cpu_isa::avx2_vnni:
      return "AVX2 with VNNI";
    case dnnl::cpu_isa::avx512_core:
      return "AVX-512";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "AVX-512 with VNNI";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX-512 with BF16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "AVX-512 with AMX";
    default:
      return "another";
  }
}

}  // namespace

const CpuDispatch& cpu_dispatch() {
  static const CpuDispatch dispatch = choose();
  return dispatch;
}

const kernels::KernelTable& dispatched_kernel_table() {
  return cpu_dispatch().kernels->kernel_table();
}

std::string describe_cpu_dispatch() {
  const CpuDispatch& d = cpu_dispatch();
  std::string text = fmt::format("cpu                   {}\n", cpu_brand());
  text += "levels (TFM_CPU_ISA)\n";
  for (size_t i = 0; i < d.levels.size(); ++i) {
    const IsaLevel& level = d.levels[i];
    const char* state = i == d.chosen ? "in use" : level.supported ? "supported" : "lacking";
    text += fmt::format("  {:<14}{:<11}kernels {}: {}{}\n", level.name, state, level.kernel_set,
                        level.compiled, level.supported ? "" : "; lacks " + level.missing);
  }
  text += fmt::format("in use                {}: {}\n", d.level().name, d.reason);
  text +=
      fmt::format("oneDNN                {}{}\n", onednn_isa_name(dnnl::get_effective_cpu_isa()),
                  d.onednn_cap.empty() ? "" : " (capped by TFM_CPU_ISA)");
  return text;
}

}  // namespace tfm::internal::cpu
