// Cross-entropy, top-k and the key/value cache copies on CUDA against the CPU on the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/ops/ops.h"

#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cpu/cross_entropy_cpu.h"
#include "tfm/kernels/cuda/cross_entropy_cuda.h"
#endif

namespace tfm {
namespace {

using testing::expect_matches_cpu;
using testing::uniform_tensor;

constexpr double kTolerance = 1e-5;  // f32: the same sums in another order
constexpr int32_t kIgnore = -100;

// ---- cross_entropy ----

struct LossResult {
  ops::CrossEntropyResult result;
  Tensor dlogits;
};

LossResult run_loss(const Tensor& logits0, const Tensor& targets0, float eps, double normalizer,
                    Device device, float upstream) {
  Tensor logits = device == Device::cpu ? logits0.clone() : logits0.to(device);
  logits.set_requires_grad(true);
  LossResult r;
  Tape tape;
  {
    TapeScope scope(tape);
    r.result = ops::cross_entropy(logits, targets0.to(device), eps, kIgnore, normalizer);
  }
  tape.backward(r.result.loss, Tensor::full(Shape{}, upstream).to(device));
  r.dlogits = logits.grad();
  return r;
}

void check_loss(int64_t rows, int64_t vocab, float eps, double normalizer, uint32_t seed,
                const std::string& what) {
  const Tensor logits = uniform_tensor({rows, vocab}, seed, -4.0f, 4.0f);
  std::vector<int32_t> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    y[static_cast<size_t>(r)] = r % 5 == 3 ? kIgnore : static_cast<int32_t>((r * 7919) % vocab);
  const Tensor targets = Tensor::from_ints({rows}, y);
  const LossResult cpu = run_loss(logits, targets, eps, normalizer, Device::cpu, 0.75f);
  const LossResult cuda = run_loss(logits, targets, eps, normalizer, Device::cuda, 0.75f);
  EXPECT_EQ(cpu.result.tokens, cuda.result.tokens) << what;
  EXPECT_NEAR(cpu.result.nll_sum, cuda.result.nll_sum, 1e-5 * std::abs(cpu.result.nll_sum)) << what;
  expect_matches_cpu(cpu.result.loss, cuda.result.loss, kTolerance, what + ": loss");
  expect_matches_cpu(cpu.dlogits, cuda.dlogits, kTolerance, what + ": dlogits");
}

TEST(CudaOpsCrossEntropy, LossSumsAndGradient) {
  TFM_REQUIRE_CUDA();
  check_loss(7, 6, 0.0f, 0.0, 1, "7x6, no smoothing");
  check_loss(7, 6, 0.1f, 0.0, 2, "7x6, eps 0.1");
  check_loss(37, 1000, 0.1f, 0.0, 3, "37x1000, eps 0.1");
  check_loss(37, 1000, 0.1f, 250.0, 4, "37x1000, normalizer 250");
  check_loss(5, 37000, 0.1f, 0.0, 5, "5x37000");
  check_loss(300, 333, 1.0f, 0.0, 6, "300x333, eps 1");
}

TEST(CudaOpsCrossEntropy, AllRowsIgnoredAndBadTargets) {
  TFM_REQUIRE_CUDA();
  const Tensor logits = uniform_tensor({4, 9}, 7).to(Device::cuda);
  const Tensor ignored = Tensor::from_ints({4}, {kIgnore, kIgnore, kIgnore, kIgnore});
  const ops::CrossEntropyResult r =
      ops::cross_entropy(logits, ignored.to(Device::cuda), 0.1f, kIgnore);
  EXPECT_EQ(r.tokens, 0);
  EXPECT_EQ(r.nll_sum, 0.0);
  EXPECT_EQ(r.loss.to(Device::cpu).to_floats()[0], 0.0f);
  const Tensor bad = Tensor::from_ints({4}, {1, 9, 0, kIgnore}).to(Device::cuda);
  EXPECT_THROW(ops::cross_entropy(logits, bad, 0.1f, kIgnore), Error);
}

#ifdef TFM_HAVE_CUDA
// The row kernels of the chunked output loss (ops/output_loss.cc) against the CPU's: row terms,
// lse, the in-place gradient and its bf16 copy.
TEST(CudaOpsCrossEntropy, RowKernels) {
  TFM_REQUIRE_CUDA();
  const int64_t rows = 11, vocab = 3001;
  const float eps = 0.1f, scale = 0.25f;
  const Tensor logits = uniform_tensor({rows, vocab}, 8, -3.0f, 3.0f);
  std::vector<int32_t> y(rows);
  for (int64_t r = 0; r < rows; ++r) y[r] = r == 4 ? kIgnore : static_cast<int32_t>(r * 271);
  const Tensor targets = Tensor::from_ints({rows}, y);
  const Tensor targets_d = targets.to(Device::cuda);

  Tensor cpu_stats = Tensor::zeros({rows, 2}), cpu_lse = Tensor::zeros({rows});
  cpu::cross_entropy_rows(logits.data<float>(), y.data(), rows, vocab, eps, kIgnore,
                          cpu_stats.data<float>(), cpu_lse.data<float>());
  Tensor stats = Tensor::zeros({rows, 2}).to(Device::cuda),
         lse = Tensor::zeros({rows}).to(Device::cuda);
  const Tensor logits_d = logits.to(Device::cuda);
  cuda::cross_entropy_rows(logits_d.device_data<float>(), targets_d.device_data<int32_t>(), rows,
                           vocab, eps, kIgnore, stats.device_data<float>(),
                           lse.device_data<float>());
  expect_matches_cpu(cpu_stats, stats, kTolerance, "row loss and nll");
  expect_matches_cpu(cpu_lse, lse, kTolerance, "lse");

  Tensor cpu_grad = logits.clone();
  Tensor cpu_bf16 = Tensor::empty({rows, vocab}, DType::bf16);
  cpu::cross_entropy_rows_with_grad(cpu_grad.data<float>(), y.data(), rows, vocab, eps, kIgnore,
                                    scale, cpu_stats.data<float>(), cpu_bf16.data<bf16>());
  Tensor grad = logits.to(Device::cuda);
  Tensor grad_bf16 = Tensor::empty({rows, vocab}, DType::bf16, Device::cuda);
  cuda::cross_entropy_rows_with_grad(grad.device_data<float>(), targets_d.device_data<int32_t>(),
                                     rows, vocab, eps, kIgnore, scale, stats.device_data<float>(),
                                     grad_bf16.device_data<bf16>());
  expect_matches_cpu(cpu_stats, stats, kTolerance, "row loss and nll, with the gradient");
  expect_matches_cpu(cpu_grad, grad, kTolerance, "in-place gradient");
  expect_matches_cpu(cpu_bf16, grad_bf16, 1e-2, "bf16 gradient");  // bf16 rounding of either
}
#endif

// ---- top_k ----

void expect_same_top_k(const ops::TopK& cpu, const ops::TopK& cuda, const std::string& what) {
  const std::vector<int32_t> counts = cpu.counts.to_ints();
  ASSERT_EQ(counts, cuda.counts.to(Device::cpu).to_ints()) << what;
  const int64_t k = cpu.values.dim(1);
  const std::vector<float> cv = cpu.values.to_floats(),
                           gv = cuda.values.to(Device::cpu).to_floats();
  const std::vector<int32_t> ci = cpu.indices.to_ints(),
                             gi = cuda.indices.to(Device::cpu).to_ints();
  for (size_t r = 0; r < counts.size(); ++r)
    for (int64_t j = 0; j < counts[r]; ++j) {
      const size_t at = r * static_cast<size_t>(k) + static_cast<size_t>(j);
      EXPECT_EQ(ci[at], gi[at]) << what << ": row " << r << ", entry " << j;
      EXPECT_EQ(cv[at], gv[at]) << what << ": row " << r << ", entry " << j;
    }
}

TEST(CudaOpsTopK, RandomRowsTiesInfinitiesAndExclusion) {
  TFM_REQUIRE_CUDA();
  const int64_t rows = 6, n = 37000;
  std::vector<float> x = uniform_tensor({rows, n}, 9, -20.0f, 0.0f).to_floats();
  const float inf = std::numeric_limits<float>::infinity();
  // Row 1: many equal maxima (ties go to the lower index).
  for (int64_t j = 100; j < n; j += 997) x[static_cast<size_t>(n + j)] = 1.0f;
  // Row 2: -inf and NaN everywhere but a few entries (fewer than k are filled).
  for (int64_t j = 0; j < n; ++j)
    x[static_cast<size_t>(2 * n + j)] = j % 2 ? -inf : std::numeric_limits<float>::quiet_NaN();
  x[static_cast<size_t>(2 * n + 5)] = 3.0f;
  x[static_cast<size_t>(2 * n + 36000)] = -1.0f;
  x[static_cast<size_t>(2 * n + 17)] = 3.0f;
  // Row 3: +inf entries enter; row 4: all equal.
  x[static_cast<size_t>(3 * n + 30000)] = inf;
  x[static_cast<size_t>(3 * n + 2)] = inf;
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(4 * n + j)] = -0.5f;
  // Row 5: the best entry is the excluded index.
  x[static_cast<size_t>(5 * n + 3)] = 10.0f;
  const Tensor t = Tensor::from_floats({rows, n}, x);
  const Tensor td = t.to(Device::cuda);
  for (const int64_t k : {1, 4, 8, 42, 64})
    for (const int64_t excluded : {int64_t{-1}, int64_t{3}}) {
      const std::string what = "k " + std::to_string(k) + ", excluded " + std::to_string(excluded);
      expect_same_top_k(ops::top_k(t, k, excluded), ops::top_k(td, k, excluded), what);
    }
}

TEST(CudaOpsTopK, ShortRows) {
  TFM_REQUIRE_CUDA();
  const Tensor t = uniform_tensor({33, 7}, 10);
  expect_same_top_k(ops::top_k(t, 8, -1), ops::top_k(t.to(Device::cuda), 8, -1), "n 7, k 8");
  expect_same_top_k(ops::top_k(t, 3, 0), ops::top_k(t.to(Device::cuda), 3, 0), "n 7, k 3");
}

// ---- cache_write, cache_gather ----

Tensor cache_tensor(const Shape& shape, uint32_t seed, DType dtype) {
  Tensor t = uniform_tensor(shape, seed);
  if (dtype == DType::f32) return t;
  Tensor out = Tensor::empty(shape, DType::bf16);
  const std::vector<float> v = t.to_floats();
  for (size_t i = 0; i < v.size(); ++i) out.data<bf16>()[i] = float_to_bf16(v[i]);
  return out;
}

void expect_equal(const Tensor& cpu, const Tensor& cuda, const std::string& what) {
  EXPECT_EQ(cuda.device(), Device::cuda) << what;
  EXPECT_EQ(cpu.to_floats(), cuda.to(Device::cpu).to_floats()) << what;  // copies: exact
}

TEST(CudaOpsCache, WriteAndGather) {
  TFM_REQUIRE_CUDA();
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const int64_t width : {int64_t{12}, int64_t{3}, int64_t{64}}) {
      const std::string what =
          std::string(dtype == DType::f32 ? "f32" : "bf16") + ", width " + std::to_string(width);
      Tensor cache = cache_tensor({5, 9, width}, 11, dtype);
      Tensor cache_d = cache.to(Device::cuda);
      const Tensor values = cache_tensor({4, 2, width}, 12, dtype);
      ops::cache_write(cache, values, 3);
      ops::cache_write(cache_d, values.to(Device::cuda), 3);
      expect_equal(cache, cache_d, what + ": write");

      const std::vector<int64_t> rows = {4, 0, 2, 2};
      Tensor dst = cache_tensor({4, 7, width}, 13, dtype);
      Tensor dst_d = dst.to(Device::cuda);
      ops::cache_gather(cache, Tensor(), rows, 6, dst);
      ops::cache_gather(cache_d, Tensor(), rows, 6, dst_d);
      expect_equal(dst, dst_d, what + ": gather");

      std::vector<int32_t> table(5 * 9);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 3 + 1) % 5);
      const Tensor slots = Tensor::from_ints({5, 9}, table);
      ops::cache_gather(cache, slots, rows, 5, dst);
      ops::cache_gather(cache_d, slots, rows, 5, dst_d);  // the table from the host
      expect_equal(dst, dst_d, what + ": gather through slots");
      Tensor dst_d2 = cache_tensor({4, 7, width}, 13, dtype).to(Device::cuda);
      ops::cache_gather(cache_d, Tensor(), rows, 6, dst_d2);
      ops::cache_gather(cache_d, slots.to(Device::cuda), rows, 5, dst_d2);  // on the device
      expect_equal(dst, dst_d2, what + ": gather through device slots");
    }
  }
}

}  // namespace
}  // namespace tfm
