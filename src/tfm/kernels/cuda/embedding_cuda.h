// Embedding lookups and positional-table additions on f32 device rows of width d
// (embedding_cpu.h on the GPU: the same arguments and semantics, device pointers, queued on
// cuda::stream()).
//
// The ids live on the device, so nothing checks them on the host (that would copy them back and
// wait for the GPU on every lookup); ops::embedding checks CPU ids, and the CUDA path relies on the
// ids being checked where they are made (the vocabulary's encode, the batcher). An id outside the
// table reads and writes no memory out of bounds: the forward gives its row NaN, so a bad id shows
// up as a non-finite loss instead of a fault, and the backward leaves the table's gradient alone.
#pragma once

#include <cstdint>

namespace tfm::internal::cuda {

// out[i, :] = scale * table[ids[i], :] for i < n (NaN for an id outside [0, vocab)).
void embedding(const int32_t* ids, int64_t n, const float* table, int64_t vocab, int64_t d,
               float scale, float* out);
// dtable[v, :] (+)= scale * sum over i with ids[i] == v of g[i, :]; rows no id hits get 0 when
// !accumulate. The token positions are sorted by id (a stable radix sort), then one block per id
// adds its tokens' rows in token order, as the CPU kernel does: the same sums, the same from run
// to run (no float atomics). `workspace`: embedding_backward_workspace(n, vocab) int32 elements of
// device memory that the op allocates (one more argument than the CPU kernel's). n < 2^31.
int64_t embedding_backward_workspace(int64_t n, int64_t vocab);
void embedding_backward(const int32_t* ids, int64_t n, const float* g, int64_t vocab, int64_t d,
                        float scale, float* dtable, bool accumulate, int32_t* workspace);

// out[b, t, :] = x[b, t, :] + table[offset + t, :] for x: [batch, steps, d].
void add_positions(const float* x, const float* table, int64_t batch, int64_t steps, int64_t d,
                   int64_t offset, float* out);
// dtable[offset + t, :] (+)= sum over b of g[b, t, :]; the other rows of the [table_rows, d]
// gradient get 0 when !accumulate.
void add_positions_backward_table(const float* g, int64_t batch, int64_t steps, int64_t d,
                                  int64_t offset, int64_t table_rows, float* dtable,
                                  bool accumulate);

}  // namespace tfm::internal::cuda
