// Wall time of each OpenMP parallel region by the function it runs, for bench/region_times.sh.
// Loaded with LD_PRELOAD into a program built with GCC's libgomp: it wraps GOMP_parallel (what
// `#pragma omp parallel` compiles to), times each call on the calling thread, and at exit writes
// to the file named by TFM_REGION_TIMES one line per outlined function (calls, seconds, idle
// seconds, the object's path and the function's offset in it, for addr2line), after a first line
// with the time from the first region's start to the last one's end and the part of it inside
// regions. A region's idle seconds are its threads' time outside the function, averaged over its
// threads: wall time x threads - the threads' own times in it, / threads (the fork, the join and
// the waits for the slowest thread at the join; a barrier inside the function counts as the
// function's time). GCC's libgomp has no OMPT interface to ask for this.
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
static double idle[MAX_FUNCTIONS];
static int function_count;
static double first_start = -1, last_end, inside;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// One region's function and its threads' own times in it (each thread runs `run` once).
#define MAX_THREADS 256
struct region {
  void (*fn)(void*);
  void* data;
  int threads;
  double busy[MAX_THREADS];
};

static void run(void* p) {
  struct region* r = p;
  const double start = now();
  r->fn(r->data);
  const double busy = now() - start;
  const int slot = __atomic_fetch_add(&r->threads, 1, __ATOMIC_RELAXED);
  if (slot < MAX_THREADS) r->busy[slot] = busy;
}

// In the benchmarks one thread opens the regions (a nested one runs inline), so the tables need no
// lock.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads, unsigned flags) {
  static gomp_parallel_fn real;
  if (real == NULL) real = (gomp_parallel_fn)dlsym(RTLD_NEXT, "GOMP_parallel");
  struct region region = {fn, data, 0, {0}};
  const double start = now();
  if (first_start < 0) first_start = start;
  real(run, &region, threads, flags);
  const double end = now();
  const int team = region.threads < MAX_THREADS ? region.threads : MAX_THREADS;
  double busy = 0;
  for (int t = 0; t < team; ++t) busy += region.busy[t];
  inside += end - start;
  last_end = end;
  int i = 0;
  while (i < function_count && functions[i] != (void*)fn) ++i;
  if (i == function_count && function_count < MAX_FUNCTIONS)
    functions[function_count++] = (void*)fn;
  if (i < MAX_FUNCTIONS) {
    ++calls[i];
    seconds[i] += end - start;
    if (team > 0) idle[i] += (end - start) - busy / team;
  }
}

// Called by the benchmarks where their timed part starts (bench/region_times_mark.h): what was
// timed before is forgotten.
void tfm_region_times_reset(void) {
  for (int i = 0; i < function_count; ++i) {
    calls[i] = 0;
    seconds[i] = 0;
    idle[i] = 0;
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
    fprintf(out, "%ld %.6f %.6f %s 0x%lx\n", calls[i], seconds[i], idle[i], info.dli_fname,
            (unsigned long)((char*)functions[i] - (char*)info.dli_fbase));
  }
  fclose(out);
}
