// ops::packed_linears (several packed weights on one x, inference) against ops::linear a weight:
// the same bits for f32, bf16 and int8 weights, for row counts on each side of the panel kernels'
// limit (f32 weights in panels share one region up to 128 rows, as int8 ones do), output widths
// that end inside a panel and depths with a partial group of 4; the refusals; and self-attention's
// decoding step (MultiHeadAttention::append_and_attend, which runs its three projections through
// it) against append then attend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/autograd/tape.h"
#include "tfm/core/error.h"
#include "tfm/nn/attention.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal {
namespace {

using testing::differing_bits;
using testing::random_values;

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const testing::Values v = random_values(n, rng);
  return Tensor::from_floats(shape, std::vector<float>(v.begin(), v.end()));
}

// The largest magnitude: the outputs compared are not all zeros.
float largest_magnitude(const Tensor& t) {
  float largest = 0;
  for (float v : t.to_floats()) largest = std::max(largest, std::fabs(v));
  return largest;
}

// The number of elements of positions [0, length) of a cache buffer [rows, capacity, width] whose
// bits differ (the positions past it were never written).
int64_t differing_cached_bits(const Tensor& a, const Tensor& b, int64_t length) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  const int64_t capacity = a.dim(1), width = a.dim(2);
  int64_t differ = 0;
  for (int64_t r = 0; r < a.dim(0); ++r)
    for (int64_t j = 0; j < length * width; ++j) {
      const auto at = static_cast<size_t>(r * capacity * width + j);
      differ += std::memcmp(&x[at], &y[at], sizeof(float)) != 0;
    }
  return differ;
}

TEST(OpsPackedLinears, TheSameBitsAsOneLinearAWeight) {
  std::mt19937 rng(5);
  for (DType type : {DType::f32, DType::bf16, DType::i8})
    for (int64_t k : {66, 128})
      for (int64_t rows : {1, 5, 32, 128, 300}) {
        SCOPED_TRACE(fmt::format("{} weights, k {}, {} rows", dtype_name(type), k, rows));
        const std::vector<int64_t> outs = {64, 96, 200};
        std::vector<Tensor> weights, biases;
        std::vector<std::shared_ptr<const ops::PackedWeight>> packed;
        std::vector<const ops::PackedWeight*> pointers;
        for (size_t j = 0; j < outs.size(); ++j) {
          weights.push_back(random_tensor({outs[j], k}, rng));
          biases.push_back(j == 1 ? Tensor() : random_tensor({outs[j]}, rng));
          packed.push_back(ops::pack_weight(weights.back(), type));
          pointers.push_back(packed.back().get());
        }
        const Tensor x = random_tensor({rows, 1, k}, rng);
        const std::vector<Tensor> together = ops::packed_linears(x, pointers, biases);
        ASSERT_EQ(together.size(), outs.size());
        const DType precision = type == DType::i8 ? DType::f32 : type;
        for (size_t j = 0; j < outs.size(); ++j) {
          const Tensor alone = ops::linear(x, weights[j], biases[j], {precision, pointers[j]});
          EXPECT_EQ(together[j].shape(), Shape({rows, 1, outs[j]}));
          EXPECT_EQ(differing_bits(together[j], alone), 0) << "weight " << j;
          EXPECT_GT(largest_magnitude(alone), 0.1f);
        }
      }
}

TEST(OpsPackedLinears, RefusesWeightsThatDoNotTakeXAndTensorsThatNeedAGradient) {
  std::mt19937 rng(6);
  const auto a = ops::pack_weight(random_tensor({8, 16}, rng), DType::i8);
  const auto narrow = ops::pack_weight(random_tensor({8, 12}, rng), DType::i8);
  const auto f32 = ops::pack_weight(random_tensor({8, 16}, rng), DType::f32);
  const Tensor x = random_tensor({3, 16}, rng);
  EXPECT_THROW(ops::packed_linears(x, {a.get(), narrow.get()}, {Tensor(), Tensor()}), Error);
  EXPECT_THROW(ops::packed_linears(x, {a.get(), f32.get()}, {Tensor(), Tensor()}), Error);
  EXPECT_THROW(ops::packed_linears(x, {a.get()}, {}), Error);
  EXPECT_THROW(ops::packed_linears(x, {a.get()}, {random_tensor({7}, rng)}), Error);
  // Under a tape, an input that requires a gradient (as ops::linear would record one).
  Tape tape;
  TapeScope scope(tape);
  Tensor needs_grad = x;
  needs_grad.set_requires_grad(true);
  EXPECT_THROW(ops::packed_linears(needs_grad, {a.get()}, {Tensor()}), Error);
}

// Three decoding steps of 32 rows through a packed self-attention, with its projections together
// and one after the other: the same outputs and the same caches, bit for bit.
TEST(OpsPackedLinears, SelfAttentionsStepEqualsAppendThenAttend) {
  for (DType type : {DType::f32, DType::i8}) {
    SCOPED_TRACE(dtype_name(type));
    std::mt19937_64 init_rng(7);
    nn::MultiHeadAttention attention(64, 4, 16, 16, true, 0.0f);
    attention.init(init_rng);
    // init leaves zero biases: give them values, as a trained model has.
    std::mt19937 rng(8);
    for (nn::Linear* p : {&attention.q_proj, &attention.k_proj, &attention.v_proj})
      p->bias = random_tensor({p->weight.dim(0)}, rng);
    attention.pack(type);
    const DType precision = type == DType::i8 ? DType::f32 : type;
    const int64_t rows = 32;
    nn::KeyValueCache together = attention.empty_cache(rows, 4, precision);
    nn::KeyValueCache apart = attention.empty_cache(rows, 4, precision);
    for (int step = 0; step < 3; ++step) {
      const Tensor input = random_tensor({rows, 1, 64}, rng);
      ops::AttentionMask mask;
      mask.causal = true;
      mask.query_offset = together.length;
      const Tensor a = attention.append_and_attend(input, together, mask, precision);
      attention.append(input, apart, precision);
      const Tensor b = attention.attend(input, apart, mask, precision);
      EXPECT_EQ(differing_bits(a, b), 0) << "step " << step;
      EXPECT_GT(largest_magnitude(a), 0.01f);
      EXPECT_EQ(together.length, apart.length);
      EXPECT_EQ(differing_cached_bits(together.keys, apart.keys, together.length), 0);
      EXPECT_EQ(differing_cached_bits(together.values, apart.values, together.length), 0);
    }
  }
}

}  // namespace
}  // namespace tfm::internal
