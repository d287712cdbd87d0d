// Embedding lookups and positional-table additions on f32 rows of width d.
#pragma once

#include <cstdint>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// out[i, :] = scale * table[ids[i], :] for i < n. The ids must already be in range.
void embedding(const int32_t* ids, int64_t n, const float* table, int64_t d, float scale,
               float* out);
// dtable[v, :] (+)= scale * sum over i with ids[i] == v of g[i, :]; rows no id hits get 0 when
// !accumulate. Threads split the d columns, so rows hit several times have a single writer, and
// every element is summed in token order whatever the thread count.
void embedding_backward(const int32_t* ids, int64_t n, const float* g, int64_t vocab, int64_t d,
                        float scale, float* dtable, bool accumulate);

// out[b, t, :] = x[b, t, :] + table[offset + t, :] for x: [batch, steps, d].
void add_positions(const float* x, const float* table, int64_t batch, int64_t steps, int64_t d,
                   int64_t offset, float* out);
// dtable[offset + t, :] (+)= sum over b of g[b, t, :]; the other rows of the [table_rows, d]
// gradient get 0 when !accumulate.
void add_positions_backward_table(const float* g, int64_t batch, int64_t steps, int64_t d,
                                  int64_t offset, int64_t table_rows, float* dtable,
                                  bool accumulate);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
