// Force-included into src/tfm/ops/autocast.cc by fuzz/CMakeLists.txt: clang 14 rejects
// __builtin_cpu_supports("amx-bf16") (a feature name it does not know yet). The fuzz targets never
// multiply in bf16, so the probe answers "not supported" and precision "auto" means f32 here.
#pragma once
#define __builtin_cpu_supports(feature) tfm_fuzz_cpu_supports(feature)
inline bool tfm_fuzz_cpu_supports(const char*) {
  return false;
}
