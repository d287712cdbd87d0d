#include "tfm/kernels/cpu/log_softmax_top_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/integer_math.h"
#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/quantize_cpu.h"
#include "tfm/kernels/cpu/stealing_ranges.h"
#include "tfm/kernels/cpu/thread_shares.h"
#include "tfm/kernels/cpu/top_k_cpu.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Each block's maximum per row and sum of exp(z - maximum) over the block (block b's row r at
// b * rows + r), and each thread's best tokens per row over the blocks it took.
struct Partials {
  int64_t rows, m;
  std::vector<float> max, sum, values;
  std::vector<int32_t> tokens, counts;

  Partials(int64_t blocks, int threads, int64_t rows_, int64_t m_)
      : rows(rows_),
        m(m_),
        max(static_cast<size_t>(blocks * rows)),
        sum(static_cast<size_t>(blocks * rows)),
        values(static_cast<size_t>(threads * rows * m)),
        tokens(static_cast<size_t>(threads * rows * m)),
        counts(static_cast<size_t>(threads * rows), 0) {}

  size_t at(int64_t block, int64_t row) const { return static_cast<size_t>(block * rows + row); }
  size_t thread_row(int thread, int64_t row) const {
    return static_cast<size_t>(thread * rows + row);
  }
  TopK top(int thread, int64_t row) {
    const size_t i = thread_row(thread, row);
    return TopK{values.data() + i * m, tokens.data() + i * m, static_cast<int32_t>(m), counts[i]};
  }
};

// Block b's logits z[0, n) of vocabulary columns [offset, offset + n) for one row: its maximum,
// the sum of exp(z_j - maximum) (0 when every logit is -inf), and its best tokens into `top`.
void fold_row(const float* z, int64_t n, int64_t offset, int64_t excluded, float& max, float& sum,
              TopK& top) {
  max = top.scan(z, n, offset, excluded);
  sum = max == kNegInf ? 0.0f : sum_exp(z, n, max);
}

}  // namespace

void log_softmax_top(const LogSoftmaxTopArgs& args, float* values, int32_t* tokens, int32_t* counts,
                     float* log_norms) {
  TFM_CHECK(args.dtype == DType::f32 || args.dtype == DType::bf16,
            "log_softmax_top: {} operands are not supported", dtype_name(args.dtype));
  TFM_CHECK(args.m >= 1 && args.m <= args.vocab && args.d >= 1 && args.rows >= 0 &&
                args.block >= 1 && (args.embedding != nullptr || args.packed_blocks != nullptr),
            "log_softmax_top: m {} must be in [1, vocab {}] (rows {}, d {}, blocks of {})", args.m,
            args.vocab, args.rows, args.d, args.block);
  const int64_t rows = args.rows, d = args.d, vocab = args.vocab, m = args.m;
  if (rows == 0) return;
  const int64_t block = args.block;
  const int64_t blocks = ceil_div(vocab, block);
  const size_t element = dtype_size(args.dtype);
  const int max_threads = omp_get_max_threads();
  // An int8 embedding: hidden quantised once, for every block.
  const bool int8 = args.packed_blocks != nullptr && args.packed_blocks[0]->dtype() == DType::i8;
  TFM_CHECK(!int8 || args.dtype == DType::f32, "log_softmax_top: an i8 embedding takes f32 hidden");
  std::vector<uint8_t> quantised(int8 ? static_cast<size_t>(rows * d) : 0);
  std::vector<float> scales(int8 ? static_cast<size_t>(rows) : 0);
  if (int8)
    quantize_rows_u8(static_cast<const float*>(args.hidden), rows, d, quantised.data(),
                     scales.data());
  Partials partial(blocks, max_threads, rows, m);

  // The blocks shared out among the threads (stealing_ranges.h: contiguous ranges, a thread that
  // runs out taking from the others' ends), each computed with a one-thread product (oneDNN runs
  // sequentially inside a parallel region). Each block's log-sum-exp is kept apart and the blocks'
  // are added in vocabulary order below, and TopK's order does not depend on the order of its
  // input: the result is the same bits whichever thread took a block, and for any number of
  // threads.
  StealingRanges work(blocks, max_threads, product_thread_shares().measured());
#pragma omp parallel num_threads(max_threads)
  {
    const int thread = omp_get_thread_num();
    Tensor logits = Tensor::empty({rows, block});
    float* z = logits.data<float>();
    for (int64_t b = work.next(thread); b >= 0; b = work.next(thread)) {
      const int64_t offset = b * block, n = std::min(block, vocab - offset);
      const float* bias = args.bias != nullptr ? args.bias + offset : nullptr;
      if (int8) {
        packed_linear_quantized(quantised.data(), scales.data(), rows,
                                static_cast<const PackedWeight&>(*args.packed_blocks[b]), bias, z);
      } else if (args.packed_blocks) {
        packed_linear(args.hidden, rows, static_cast<const PackedWeight&>(*args.packed_blocks[b]),
                      bias, z);
      } else {
        GemmArgs gemm_args;
        gemm_args.a = GemmOperand::dense(args.hidden, args.dtype, {rows, d});
        gemm_args.b = GemmOperand::dense(static_cast<const char*>(args.embedding) +
                                             static_cast<size_t>(offset * d) * element,
                                         args.dtype, {n, d})
                          .transposed();
        gemm_args.c = GemmOperand::dense(z, DType::f32, {rows, n});
        gemm_args.bias = bias;
        gemm(gemm_args);
      }
      for (int64_t r = 0; r < rows; ++r) {
        TopK top = partial.top(thread, r);
        fold_row(z + r * n, n, offset, args.excluded, partial.max[partial.at(b, r)],
                 partial.sum[partial.at(b, r)], top);
        partial.counts[partial.thread_row(thread, r)] = top.count;
      }
    }
  }

  // log p = z - (max + log sum), the blocks' sums added in vocabulary order.
#pragma omp parallel for schedule(static) if (rows * max_threads * m >= 4096)
  for (int64_t r = 0; r < rows; ++r) {
    float max = kNegInf;
    for (int64_t b = 0; b < blocks; ++b) max = std::max(max, partial.max[partial.at(b, r)]);
    float sum = 0.0f;
    for (int64_t b = 0; b < blocks; ++b) {
      const size_t i = partial.at(b, r);
      if (partial.max[i] != kNegInf) sum += partial.sum[i] * exp_f32(partial.max[i] - max);
    }
    TopK top{values + r * m, tokens + r * m, static_cast<int32_t>(m), 0};
    for (int t = 0; t < max_threads; ++t) {
      const TopK mine = partial.top(t, r);
      for (int32_t i = 0; i < mine.count; ++i) top.insert(mine.values[i], mine.indices[i]);
    }
    const float log_norm = max + std::log(sum);
    for (int32_t i = 0; i < top.count; ++i) values[r * m + i] -= log_norm;
    counts[r] = top.count;
    if (log_norms) log_norms[r] = log_norm;
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
