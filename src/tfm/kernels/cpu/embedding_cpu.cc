#include "tfm/kernels/cpu/embedding_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "tfm/kernels/cpu/parallel.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void embedding(const int32_t* ids, int64_t n, const float* table, int64_t d, float scale,
               float* out) {
#pragma omp parallel for schedule(static) if (n * d >= kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = table + static_cast<int64_t>(ids[i]) * d;
    float* o = out + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) o[j] = scale * row[j];
  }
}

namespace {

// Column blocks are multiples of a cache line (16 floats), so two threads never write one line.
constexpr int64_t kColumnAlign = 16;

void zero_rows(float* data, int64_t rows, int64_t d) {
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMinElements)
  for (int64_t r = 0; r < rows; ++r) std::memset(data + r * d, 0, sizeof(float) * d);
}

}  // namespace

// out[i, :] = scale * table[ids[i], :], so d table[v, :] = scale * sum_{i: ids[i] = v} g[i, :].
void embedding_backward(const int32_t* ids, int64_t n, const float* g, int64_t vocab, int64_t d,
                        float scale, float* dtable, bool accumulate) {
  if (!accumulate) zero_rows(dtable, vocab, d);
  const int64_t blocks = (d + kColumnAlign - 1) / kColumnAlign;
#pragma omp parallel if (n * d >= kParallelMinElements)
  {
    const int64_t threads = omp_get_num_threads();
    const int64_t thread = omp_get_thread_num();
    const int64_t first = blocks * thread / threads * kColumnAlign;
    const int64_t last = std::min(d, blocks * (thread + 1) / threads * kColumnAlign);
    for (int64_t i = 0; i < n; ++i) {
      float* row = dtable + static_cast<int64_t>(ids[i]) * d;
      const float* gi = g + i * d;
#pragma omp simd
      for (int64_t j = first; j < last; ++j) row[j] += scale * gi[j];
    }
  }
}

void add_positions(const float* x, const float* table, int64_t batch, int64_t steps, int64_t d,
                   int64_t offset, float* out) {
#pragma omp parallel for collapse(2) schedule(static) if (batch * steps * d >= kParallelMinElements)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < steps; ++t) {
      const float* xr = x + (b * steps + t) * d;
      const float* pr = table + (offset + t) * d;
      float* o = out + (b * steps + t) * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) o[j] = xr[j] + pr[j];
    }
  }
}

// out[b, t, :] = x[b, t, :] + table[offset + t, :], so d table[offset + t, :] = sum_b g[b, t, :]
// and the rows outside [offset, offset + steps) get nothing.
void add_positions_backward_table(const float* g, int64_t batch, int64_t steps, int64_t d,
                                  int64_t offset, int64_t table_rows, float* dtable,
                                  bool accumulate) {
  if (!accumulate) {
    zero_rows(dtable, offset, d);
    zero_rows(dtable + (offset + steps) * d, table_rows - offset - steps, d);
  }
  // Each step t owns its table row, so threads split the steps without sharing a write.
#pragma omp parallel for schedule(static) if (batch * steps * d >= kParallelMinElements)
  for (int64_t t = 0; t < steps; ++t) {
    float* row = dtable + (offset + t) * d;
    if (!accumulate) std::memset(row, 0, sizeof(float) * d);
    for (int64_t b = 0; b < batch; ++b) {
      const float* gr = g + (b * steps + t) * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) row[j] += gr[j];
    }
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
