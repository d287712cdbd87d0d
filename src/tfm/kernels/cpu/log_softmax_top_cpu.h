// The output layer of a decoding step without its [rows, V] logits: per row, the m most probable
// tokens of log_softmax(h E^T) and their log-probabilities, which is all a beam or greedy search
// reads. The logits are computed in column blocks that stay in cache, shared out among the threads;
// each block's maximum and sum of exponentials are taken, and the block is scanned for the row's m
// best, while it is hot; the blocks' partial results are merged in vocabulary order, so the result
// does not depend on the number of threads or on which thread took a block. Reading a [128, 32000]
// f32 array four times (max, sum, normalise, top-k) would cost as much as a fifth of the product.
#pragma once

#include <cstdint>

#include "tfm/core/dtype.h"
#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

using kernels::LogSoftmaxTopArgs;  // kernels/kernel_args.h

// values/tokens: [rows, m], row r's best first (ties: the lower token); counts[r] <= m entries are
// filled (fewer when fewer tokens have a finite log-probability). log_norms (optional, [rows]):
// log(sum_j exp(z_j)).
void log_softmax_top(const LogSoftmaxTopArgs& args, float* values, int32_t* tokens, int32_t* counts,
                     float* log_norms = nullptr);

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
