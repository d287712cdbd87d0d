// The mark that bench/region_times.sh times from: where a benchmark's timed part starts. When
// bench/omp_region_times.c is preloaded it defines tfm_region_times_reset, which forgets the
// parallel regions timed so far (the start, the weights' packing, the warm-up); otherwise this does
// nothing.
#pragma once

#include <dlfcn.h>

inline void mark_region_times_start() {
  using Reset = void (*)();
  if (auto reset = reinterpret_cast<Reset>(dlsym(RTLD_DEFAULT, "tfm_region_times_reset"))) reset();
}
