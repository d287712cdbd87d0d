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
#include "tfm/kernels/cpu/top_k_cpu.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One thread's view of every row over its part of the vocabulary: the running maximum and sum of
// exp(z - maximum), and its best tokens.
struct PartialRows {
  std::vector<float> max, sum, values;
  std::vector<int32_t> tokens, counts;

  PartialRows(int64_t rows, int64_t m)
      : max(static_cast<size_t>(rows), kNegInf),
        sum(static_cast<size_t>(rows), 0.0f),
        values(static_cast<size_t>(rows * m)),
        tokens(static_cast<size_t>(rows * m)),
        counts(static_cast<size_t>(rows), 0) {}

  TopK top(int64_t row, int64_t m) {
    TopK t{values.data() + row * m, tokens.data() + row * m, static_cast<int32_t>(m),
           counts[static_cast<size_t>(row)]};
    return t;
  }
};

// Folds the logits z[0, n) of vocabulary columns [offset, offset + n) into a row's partial state:
//   max' = max(max, max_j z_j),  sum' = sum * exp(max - max') + sum_j exp(z_j - max')
// so that at the end sum = sum_j exp(z_j - max) over every column seen.
void fold_row(const float* z, int64_t n, int64_t offset, int64_t excluded, float& max, float& sum,
              TopK& top) {
  const float new_max = std::max(max, max_of(z, n));
  if (new_max == kNegInf) return;  // every logit so far is -inf
  sum = sum * exp_f32(max - new_max) + sum_exp(z, n, new_max);
  max = new_max;
  top.scan(z, n, offset, excluded);
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
  std::vector<PartialRows> partial;
  for (int t = 0; t < max_threads; ++t) partial.emplace_back(rows, m);
  int used_threads = 1;

  // Each thread takes a contiguous range of blocks (so its tokens ascend, as TopK's ties need) and
  // computes them with a one-thread product: oneDNN runs sequentially inside a parallel region.
#pragma omp parallel
  {
    const int threads = omp_get_num_threads(), thread = omp_get_thread_num();
#pragma omp single
    used_threads = threads;
    PartialRows& mine = partial[static_cast<size_t>(thread)];
    Tensor logits = Tensor::empty({rows, block});
    float* z = logits.data<float>();
    const int64_t first = blocks * thread / threads, last = blocks * (thread + 1) / threads;
    for (int64_t b = first; b < last; ++b) {
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
        TopK top = mine.top(r, m);
        fold_row(z + r * n, n, offset, args.excluded, mine.max[static_cast<size_t>(r)],
                 mine.sum[static_cast<size_t>(r)], top);
        mine.counts[static_cast<size_t>(r)] = top.count;
      }
    }
  }

  // Threads in order (their vocabulary ranges ascend): the merged top keeps the lower token first
  // among equal logits. log p = z - (max + log sum).
#pragma omp parallel for schedule(static) if (rows * used_threads * m >= 4096)
  for (int64_t r = 0; r < rows; ++r) {
    float max = kNegInf;
    for (int t = 0; t < used_threads; ++t)
      max = std::max(max, partial[static_cast<size_t>(t)].max[static_cast<size_t>(r)]);
    float sum = 0.0f;
    TopK top{values + r * m, tokens + r * m, static_cast<int32_t>(m), 0};
    for (int t = 0; t < used_threads; ++t) {
      PartialRows& p = partial[static_cast<size_t>(t)];
      if (p.max[static_cast<size_t>(r)] != kNegInf)
        sum += p.sum[static_cast<size_t>(r)] * exp_f32(p.max[static_cast<size_t>(r)] - max);
      for (int32_t i = 0; i < p.counts[static_cast<size_t>(r)]; ++i)
        top.insert(p.values[static_cast<size_t>(r * m + i)],
                   p.tokens[static_cast<size_t>(r * m + i)]);
    }
    const float log_norm = max + std::log(sum);
    for (int32_t i = 0; i < top.count; ++i) values[r * m + i] -= log_norm;
    counts[r] = top.count;
    if (log_norms) log_norms[r] = log_norm;
  }
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
