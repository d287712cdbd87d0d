// Wall time of each OpenMP parallel region by the function it runs, for bench/region_times.sh.
// Loaded with LD_PRELOAD into a program built with GCC's libgomp: it wraps GOMP_parallel (what
// `#pragma omp parallel` compiles to), times each call on the calling thread, and at exit writes
// to the file named by TFM_REGION_TIMES one line per outlined function (calls, seconds, the
// object's path and the function's offset in it, for addr2line), after a first line with the time
// from the first region's start to the last one's end and the part of it inside regions. GCC's
// libgomp has no OMPT interface to ask for this.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_FUNCTIONS 1024

typedef void (*gomp_parallel_fn)(void (*)(void*), void*, unsigned, unsigned);

static void* functions[MAX_FUNCTIONS];
static long calls[MAX_FUNCTIONS];
static double seconds[MAX_FUNCTIONS];
static int function_count;
static double first_start = -1, last_end, inside;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// In the benchmarks one thread opens the regions (a nested one runs inline), so the tables need no
// lock.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads, unsigned flags) {
  static gomp_parallel_fn real;
  if (real == NULL) real = (gomp_parallel_fn)dlsym(RTLD_NEXT, "GOMP_parallel");
  const double start = now();
  if (first_start < 0) first_start = start;
  real(fn, data, threads, flags);
  const double end = now();
  inside += end - start;
  last_end = end;
  int i = 0;
  while (i < function_count && functions[i] != (void*)fn) ++i;
  if (i == function_count && function_count < MAX_FUNCTIONS)
    functions[function_count++] = (void*)fn;
  if (i < MAX_FUNCTIONS) {
    ++calls[i];
    seconds[i] += end - start;
  }
}

// Called by the benchmarks where their timed part starts (bench/region_times_mark.h): what was
// timed before is forgotten.
void tfm_region_times_reset(void) {
  for (int i = 0; i < function_count; ++i) {
    calls[i] = 0;
    seconds[i] = 0;
  }
  first_start = -1;
  inside = 0;
}

__attribute__((destructor)) static void write_times(void) {
  const char* path = getenv("TFM_REGION_TIMES");
  if (path == NULL) return;
  FILE* out = fopen(path, "w");
  if (out == NULL) return;
  fprintf(out, "span %.6f inside %.6f\n", first_start < 0 ? 0.0 : last_end - first_start, inside);
  for (int i = 0; i < function_count; ++i) {
    if (calls[i] == 0) continue;
    Dl_info info;
    if (dladdr(functions[i], &info) == 0 || info.dli_fname == NULL) continue;
    fprintf(out, "%ld %.6f %s 0x%lx\n", calls[i], seconds[i], info.dli_fname,
            (unsigned long)((char*)functions[i] - (char*)info.dli_fbase));
  }
  fclose(out);
}
