// Helpers of the training benchmarks (bench_train_step, bench_train_dist): random token ids for a
// synthetic batch without padding, and figures rounded for the JSON lines.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal::bench {

// [rows, cols] ids drawn from [4, vocab) (past the special ids); column 0 is `first` when >= 0
// (bos of the decoder's input).
inline Tensor random_ids(int64_t rows, int64_t cols, int32_t vocab, std::mt19937& rng,
                         int32_t first) {
  std::uniform_int_distribution<int32_t> dist(4, vocab - 1);
  std::vector<int32_t> ids(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = (first >= 0 && i % static_cast<size_t>(cols) == 0) ? first : dist(rng);
  return Tensor::from_ints({rows, cols}, ids);
}

// `value` to `decimals` places, so that the JSON shows the short decimal.
inline double rounded(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

}  // namespace tfm::internal::bench
