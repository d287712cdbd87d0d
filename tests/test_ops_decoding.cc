// The decoding ops (log_softmax, top_k, output_log_softmax_top) and the key/value cache updates
// (cache_write, cache_gather) against straightforward double-precision references.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "tfm/kernels/cpu/top_k_cpu.h"
#include "tfm/kernels/cpu/vector_math.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal {
namespace {

std::vector<float> random_floats(int64_t n, unsigned seed, float lo = -3.0f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<double> log_softmax_reference(const std::vector<double>& x, int64_t rows, int64_t n) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x.data() + r * n;
    const double max = *std::max_element(row, row + n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - max);
    for (int64_t j = 0; j < n; ++j)
      y[static_cast<size_t>(r * n + j)] = row[j] - max - std::log(sum);
  }
  return y;
}

// Indices of row r's k largest values (ties: lower index), skipping `excluded` and -inf.
std::vector<int32_t> top_k_reference(const std::vector<double>& x, int64_t r, int64_t n, int64_t k,
                                     int64_t excluded) {
  std::vector<int32_t> idx;
  for (int64_t j = 0; j < n; ++j)
    if (j != excluded && std::isfinite(x[static_cast<size_t>(r * n + j)]))
      idx.push_back(static_cast<int32_t>(j));
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return x[static_cast<size_t>(r * n + a)] > x[static_cast<size_t>(r * n + b)];
  });
  if (static_cast<int64_t>(idx.size()) > k) idx.resize(static_cast<size_t>(k));
  return idx;
}

TEST(OpsLogSoftmax, MatchesDoubleReference) {
  const int64_t rows = 5, n = 37;
  std::vector<float> x = random_floats(rows * n, 1, -20.0f, 20.0f);
  x[3] = -std::numeric_limits<float>::infinity();  // a masked entry gives -inf, the rest finite
  const std::vector<double> want =
      log_softmax_reference(std::vector<double>(x.begin(), x.end()), rows, n);
  const std::vector<float> got = ops::log_softmax(Tensor::from_floats({rows, n}, x)).to_floats();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got[3], -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < got.size(); ++i) {
    if (i == 3) continue;
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << i;
  }
}

TEST(OpsTopK, MatchesSortedReferenceWithTiesAndExclusion) {
  const int64_t rows = 4, n = 50, k = 6, excluded = 7;
  std::vector<float> x = random_floats(rows * n, 2);
  for (int64_t j = 0; j < n; j += 5) x[static_cast<size_t>(n + j)] = 2.5f;  // ties in row 1
  x[static_cast<size_t>(2 * n + excluded)] = 100.0f;  // the excluded token is the best of row 2
  for (int64_t j = 2; j < n; ++j)                     // row 3: only two finite entries
    x[static_cast<size_t>(3 * n + j)] = -std::numeric_limits<float>::infinity();
  const ops::TopK top = ops::top_k(Tensor::from_floats({rows, n}, x), k, excluded);
  const std::vector<double> xd(x.begin(), x.end());
  const std::vector<int32_t> counts = top.counts.to_ints(), tokens = top.indices.to_ints();
  const std::vector<float> values = top.values.to_floats();
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int32_t> want = top_k_reference(xd, r, n, k, excluded);
    ASSERT_EQ(counts[static_cast<size_t>(r)], static_cast<int32_t>(want.size())) << r;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(tokens[static_cast<size_t>(r * k) + i], want[i]) << r << " " << i;
      EXPECT_EQ(values[static_cast<size_t>(r * k) + i], x[static_cast<size_t>(r * n + want[i])]);
    }
  }
  EXPECT_EQ(counts[3], 2);
}

// Long rows of values on a coarse grid (many equal values in every chunk of 16, and chunks where
// several lanes enter at once), k from 1 to 9, lengths off the chunk size: the lower index first
// among equal values, as the sorted reference.
TEST(OpsTopK, LongRowsWithManyTiesMatchTheSortedReference) {
  const int64_t rows = 6, n = 1013, excluded = 40;
  std::vector<float> x = random_floats(rows * n, 9, 0.0f, 8.0f);
  for (float& v : x) v = std::floor(v * 2.0f) / 2.0f;  // 16 values: ties everywhere
  // Row 5 rises: every chunk has lanes above the threshold.
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(5 * n + j)] = static_cast<float>(j / 7);
  const std::vector<double> xd(x.begin(), x.end());
  for (int64_t k = 1; k <= 9; k += 4) {
    const ops::TopK top = ops::top_k(Tensor::from_floats({rows, n}, x), k, excluded);
    const std::vector<int32_t> counts = top.counts.to_ints(), tokens = top.indices.to_ints();
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<int32_t> want = top_k_reference(xd, r, n, k, excluded);
      ASSERT_EQ(counts[static_cast<size_t>(r)], static_cast<int32_t>(want.size()));
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(tokens[static_cast<size_t>(r * k) + i], want[i]) << "k " << k << " row " << r;
    }
  }
}

// log_softmax_top takes each block's maximum in its top-k scan's pass: the scan's maximum must be
// max_of's bits for every length (whole chunks of 16 and a tail), rows with NaN (either sign, any
// position, one or two), infinities and rows of -inf only.
TEST(OpsTopK, TheScansMaximumIsMaxOfsBits) {
  namespace cpu = tfm::internal::cpu;
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(17);
  for (int64_t n = 0; n <= 70; ++n) {
    for (int pattern = 0; pattern < 6; ++pattern) {
      std::vector<float> row = random_floats(n, static_cast<unsigned>(100 * n + pattern));
      std::uniform_int_distribution<int64_t> at(0, std::max<int64_t>(n - 1, 0));
      if (n > 0 && pattern == 1) row[static_cast<size_t>(at(rng))] = nan;
      if (n > 0 && pattern == 2) {
        row[static_cast<size_t>(at(rng))] = -nan;
        row[static_cast<size_t>(at(rng))] = std::bit_cast<float>(0x7f800001u);
      }
      if (n > 0 && pattern == 3) row[static_cast<size_t>(at(rng))] = inf;
      if (pattern == 4) std::fill(row.begin(), row.end(), -inf);
      if (n > 0 && pattern == 5) row[static_cast<size_t>(n - 1)] = nan;
      std::vector<float> values(3);
      std::vector<int32_t> indices(3);
      cpu::TopK top{values.data(), indices.data(), 3, 0};
      const float got = top.scan(row.data(), n, 0, -1);
      const float want = cpu::max_of(row.data(), n);
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
          << "n " << n << ", pattern " << pattern;
    }
  }
}

// Plain embedding, or packed in blocks of `block` tokens (ops::pack_weight, f32) as an inference
// model packs its output layer; with `bias`, an output bias added to every logit (config
// output_bias), large enough to change the ranking.
void check_output_log_softmax_top(bool packed, bool bias = false) {
  const int64_t rows = 3, d = 8, vocab = 45, k = 5, excluded = 4;
  const std::vector<float> h = random_floats(rows * d, 3), e = random_floats(vocab * d, 4);
  std::vector<float> b = random_floats(vocab, 5);
  for (float& x : b) x *= 4.0f;
  std::vector<double> logits(static_cast<size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < vocab; ++v) {
      double s = bias ? b[static_cast<size_t>(v)] : 0.0;
      for (int64_t i = 0; i < d; ++i)
        s += static_cast<double>(h[static_cast<size_t>(r * d + i)]) *
             e[static_cast<size_t>(v * d + i)];
      logits[static_cast<size_t>(r * vocab + v)] = s;
    }
  const std::vector<double> lp = log_softmax_reference(logits, rows, vocab);
  // Blocks of 16 tokens: the running normaliser crosses block boundaries.
  const int64_t block = 16;
  const Tensor embedding = Tensor::from_floats({vocab, d}, e);
  std::vector<std::shared_ptr<const ops::PackedWeight>> blocks;
  if (packed)
    for (int64_t first = 0; first < vocab; first += block)
      blocks.push_back(ops::pack_weight(embedding.slice_rows(first, std::min(vocab, first + block)),
                                        DType::f32));
  const ops::TopK top =
      ops::output_log_softmax_top(Tensor::from_floats({rows, d}, h), embedding, k, excluded, blocks,
                                  block, bias ? Tensor::from_floats({vocab}, b) : Tensor());
  const std::vector<int32_t> tokens = top.indices.to_ints(), counts = top.counts.to_ints();
  const std::vector<float> values = top.values.to_floats();
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int32_t> want = top_k_reference(lp, r, vocab, k, excluded);
    ASSERT_EQ(counts[static_cast<size_t>(r)], k);
    for (int64_t i = 0; i < k; ++i) {
      const size_t at = static_cast<size_t>(r * k + i);
      EXPECT_EQ(tokens[at], want[static_cast<size_t>(i)]) << r << " " << i;
      EXPECT_NEAR(values[at], lp[static_cast<size_t>(r * vocab + want[static_cast<size_t>(i)])],
                  1e-4);
    }
  }
}

TEST(OpsOutputLogSoftmaxTop, MatchesLogitsLogSoftmaxTopK) {
  check_output_log_softmax_top(false);
}

TEST(OpsOutputLogSoftmaxTop, PackedBlocksMatchLogitsLogSoftmaxTopK) {
  check_output_log_softmax_top(true);
}

TEST(OpsOutputLogSoftmaxTop, OutputBiasIsAddedToTheLogits) {
  check_output_log_softmax_top(false, true);
  check_output_log_softmax_top(true, true);
}

// cache_write then cache_gather (with and without a slot table) on f32 and bf16 buffers, against
// element loops.
void check_cache_ops(DType dtype) {
  const int64_t rows = 3, capacity = 6, width = 4, n = 2, position = 3;
  auto as = [&](const Tensor& f32) {
    if (dtype == DType::f32) return f32;
    Tensor out = Tensor::empty(f32.shape(), DType::bf16);
    for (int64_t i = 0; i < f32.numel(); ++i)
      out.data<bf16>()[i] = float_to_bf16(f32.data<float>()[i]);
    return out;
  };
  Tensor cache =
      as(Tensor::from_floats({rows, capacity, width}, random_floats(rows * capacity * width, 5)));
  const std::vector<float> before = cache.to_floats();
  const std::vector<float> fresh_values =
      as(Tensor::from_floats({rows, n, width}, random_floats(rows * n * width, 6))).to_floats();
  ops::cache_write(cache, as(Tensor::from_floats({rows, n, width}, fresh_values)), position);
  const std::vector<float> after = cache.to_floats();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < capacity; ++j)
      for (int64_t c = 0; c < width; ++c) {
        const size_t at = static_cast<size_t>((r * capacity + j) * width + c);
        const bool written = j >= position && j < position + n;
        EXPECT_EQ(after[at],
                  written ? fresh_values[static_cast<size_t>((r * n + j - position) * width + c)]
                          : before[at]);
      }

  const std::vector<int64_t> pick{2, 0, 2, 1};
  const std::vector<int32_t> table{1, 0, 2, 2, 1, 0,  //
                                   0, 0, 0, 1, 1, 1,  //
                                   2, 1, 0, 0, 1, 2};
  const Tensor slots = Tensor::from_ints({rows, capacity}, table);
  const int64_t positions = 5, dst_capacity = 7;
  for (bool slotted : {false, true}) {
    Tensor dst = as(Tensor::zeros({4, dst_capacity, width}));
    ops::cache_gather(cache, slotted ? slots : Tensor(), pick, positions, dst);
    const std::vector<float> got = dst.to_floats();
    for (size_t r = 0; r < pick.size(); ++r)
      for (int64_t j = 0; j < dst_capacity; ++j)
        for (int64_t c = 0; c < width; ++c) {
          float want = 0.0f;  // positions past `positions` are left as they were
          if (j < positions) {
            const int64_t from =
                slotted ? table[static_cast<size_t>(pick[r] * capacity + j)] : pick[r];
            want = after[static_cast<size_t>((from * capacity + j) * width + c)];
          }
          EXPECT_EQ(got[(r * dst_capacity + j) * width + c], want) << slotted;
        }
  }
}

TEST(OpsCache, WriteAndGatherF32) {
  check_cache_ops(DType::f32);
}
TEST(OpsCache, WriteAndGatherBf16) {
  check_cache_ops(DType::bf16);
}

// A decoding step's write into caches of `base`'s width, large enough for the CPU to share the rows
// among its threads (from 128 KB): 100 of 128 rows at one position in f32, 64 rows at two
// positions in bf16. Every element of the buffer is checked: the new positions hold the values,
// the rest (other positions, the rows past the values') is unchanged.
TEST(OpsCache, AStepsWriteOfManyRowsLandsInEachRowsPosition) {
  struct Case {
    DType dtype;
    int64_t cache_rows, rows, n, position;
  };
  const int64_t capacity = 5, width = 512;
  for (const Case& c : {Case{DType::f32, 128, 100, 1, 2}, Case{DType::bf16, 64, 64, 2, 3}}) {
    SCOPED_TRACE(dtype_name(c.dtype));
    auto typed = [&](const Tensor& f32) { return c.dtype == DType::f32 ? f32 : ops::to_bf16(f32); };
    Tensor cache = typed(Tensor::from_floats({c.cache_rows, capacity, width},
                                             random_floats(c.cache_rows * capacity * width, 7)));
    const std::vector<float> before = cache.to_floats();
    const Tensor values =
        typed(Tensor::from_floats({c.rows, c.n, width}, random_floats(c.rows * c.n * width, 8)));
    const std::vector<float> fresh = values.to_floats();
    ops::cache_write(cache, values, c.position);
    const std::vector<float> after = cache.to_floats();
    int64_t mismatches = 0, written = 0;
    for (int64_t r = 0; r < c.cache_rows; ++r)
      for (int64_t j = 0; j < capacity; ++j)
        for (int64_t e = 0; e < width; ++e) {
          const auto at = static_cast<size_t>((r * capacity + j) * width + e);
          const bool is_new = r < c.rows && j >= c.position && j < c.position + c.n;
          const float want =
              is_new ? fresh[static_cast<size_t>((r * c.n + j - c.position) * width + e)]
                     : before[at];
          mismatches += after[at] != want;
          written += is_new && after[at] != before[at];
        }
    EXPECT_EQ(mismatches, 0);
    // The random values differ from the buffer's almost everywhere: the writes happened.
    EXPECT_GT(written, c.rows * c.n * width * 9 / 10);
  }
}

TEST(OpsCache, RefusesValuesThatDoNotFit) {
  Tensor cache = Tensor::zeros({2, 4, 3});
  EXPECT_THROW(ops::cache_write(cache, Tensor::zeros({2, 2, 3}), 3), Error);
  EXPECT_THROW(ops::cache_write(cache, Tensor::zeros({2, 1, 3}, DType::bf16), 0), Error);
  EXPECT_THROW(ops::cache_gather(cache, Tensor(), {2}, 2, Tensor::zeros({1, 4, 3})), Error);
}

}  // namespace
}  // namespace tfm::internal
