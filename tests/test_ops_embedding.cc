// embedding and add_positions.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/core/threading.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_f32_values;
using testing::Values;

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no tfm::Error thrown)";
}

void check_embedding(const Shape& ids_shape, const std::vector<int32_t>& ids, int64_t vocab,
                     int64_t d, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  Tensor id_tensor = Tensor::from_ints(ids_shape, ids);
  testing::check_op(
      {{Shape{vocab, d}, random_f32_values(vocab * d, rng)}},
      [&](const std::vector<Tensor>& t) {
        Tensor out = ops::embedding(id_tensor, t[0], scale);
        std::vector<int64_t> dims = ids_shape.to_vector();
        dims.push_back(d);
        EXPECT_EQ(out.shape(), Shape(dims));
        return out;
      },
      [&](const std::vector<Values>& v) {
        Values y;
        for (int32_t id : ids)
          for (int64_t j = 0; j < d; ++j) y.push_back(scale * v[0][id * d + j]);
        return y;
      });
}

TEST(OpsEmbedding, ForwardAndGradientsWithRepeatedIds) {
  // Id 3 appears three times and id 0 twice; ids 1 and 5 not at all (their gradient rows are 0).
  check_embedding(Shape{2, 4}, {3, 0, 3, 2, 4, 0, 3, 6}, 7, 8, std::sqrt(8.0f), 81);
  check_embedding(Shape{5}, {1, 1, 1, 0, 2}, 3, 17, 1.0f, 82);
  check_embedding(Shape{2, 2, 3}, {0, 9, 4, 4, 9, 2, 8, 0, 4, 1, 1, 5}, 10, 5, 0.5f, 83);
}

// Many tokens over a small vocabulary, above the parallel threshold, with d not a multiple of the
// column block: against a double reference. The table is looked up twice (the second backward
// accumulates into the first's gradient), and the sums must not depend on the thread count.
TEST(OpsEmbedding, LargeBackwardAccumulatesRepeatedRowsWithoutRaces) {
  std::mt19937 rng(84);
  const int64_t n = 3000, vocab = 50, d = 72;
  const float scale = 2.5f;
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab) - 1);
  std::vector<int32_t> ids_a(n), ids_b(n);
  for (int32_t& id : ids_a) id = pick(rng);
  for (int32_t& id : ids_b) id = pick(rng);
  Tensor tensor_a = Tensor::from_ints({n}, ids_a), tensor_b = Tensor::from_ints({n}, ids_b);
  Values table = random_f32_values(vocab * d, rng), g = random_f32_values(n * d, rng);
  Tensor t = Tensor::from_floats({vocab, d}, testing::to_float_vector(table));
  t.set_requires_grad(true);
  auto run = [&] {
    t.zero_grad();
    return testing::forward_backward(
        [&] {
          return ops::add(ops::embedding(tensor_a, t, scale), ops::embedding(tensor_b, t, scale));
        },
        g);
  };

  Tensor out = run();
  Values expected_out(n * d), dtable(vocab * d, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      expected_out[i * d + j] = scale * (table[ids_a[i] * d + j] + table[ids_b[i] * d + j]);
      dtable[ids_a[i] * d + j] += scale * g[i * d + j];
      dtable[ids_b[i] * d + j] += scale * g[i * d + j];
    }
  testing::expect_close(out.to_floats(), expected_out, 1e-6, 1e-6, "forward");
  // Each row sums about 2 n / vocab = 120 f32 terms of size up to 2.5: rounding of at most
  // 120 * 2.5 * 2^-24 = 1.8e-5 even where the terms cancel.
  testing::expect_close(t.grad().to_floats(), dtable, 1e-5, 2e-5, "table gradient");

  const int threads = num_threads();
  set_num_threads(1);
  run();
  std::vector<float> one = t.grad().to_floats();
  set_num_threads(std::max(threads, 2));
  run();
  std::vector<float> many = t.grad().to_floats();
  set_num_threads(threads);
  EXPECT_EQ(one, many);
}

TEST(OpsEmbedding, OutOfRangeIdsNameTheIdAndTheVocabulary) {
  Tensor table = Tensor::zeros({6, 4});
  std::string message = error_message([&] {
    ops::embedding(Tensor::from_ints({3}, {1, 7, 2}), table, 1.0f);
  });
  EXPECT_NE(message.find("id 7"), std::string::npos) << message;
  EXPECT_NE(message.find("size 6"), std::string::npos) << message;
  EXPECT_THROW(ops::embedding(Tensor::from_ints({2}, {-1, 0}), table, 1.0f), Error);
  EXPECT_THROW(ops::embedding(Tensor::from_ints({1}, {6}), table, 1.0f), Error);
}

TEST(OpsEmbedding, BadArgumentsThrow) {
  Tensor ids = Tensor::from_ints({2}, {0, 1});
  EXPECT_THROW(ops::embedding(Tensor::zeros({2}), Tensor::zeros({4, 3}), 1.0f), Error);
  EXPECT_THROW(ops::embedding(ids, Tensor::zeros({12}), 1.0f), Error);
  EXPECT_THROW(ops::embedding(ids, Tensor::zeros({4, 3}, DType::i32), 1.0f), Error);
}

Values add_positions_reference(const Values& x, const Values& table, int64_t batch, int64_t steps,
                               int64_t d, int64_t offset) {
  Values y(x.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t j = 0; j < d; ++j)
        y[(b * steps + t) * d + j] = x[(b * steps + t) * d + j] + table[(offset + t) * d + j];
  return y;
}

TEST(OpsAddPositions, ForwardAndGradientsOfXAndALearnedTable) {
  std::mt19937 rng(91);
  const int64_t batch = 2, steps = 3, d = 4, max_positions = 7;
  for (int64_t offset : {0, 2, 4}) {
    SCOPED_TRACE(offset);
    testing::check_op(
        {{Shape{batch, steps, d}, random_f32_values(batch * steps * d, rng)},
         {Shape{max_positions, d}, random_f32_values(max_positions * d, rng)}},
        [&](const std::vector<Tensor>& t) { return ops::add_positions(t[0], t[1], offset); },
        [&](const std::vector<Values>& v) {
          return add_positions_reference(v[0], v[1], batch, steps, d, offset);
        });
  }
}

TEST(OpsAddPositions, FixedTableGetsNoGradient) {
  std::mt19937 rng(92);
  const int64_t batch = 3, steps = 5, d = 6;
  Values x = random_f32_values(batch * steps * d, rng), table = random_f32_values(8 * d, rng);
  testing::check_op(
      {{Shape{batch, steps, d}, x}, {Shape{8, d}, table, false}},
      [&](const std::vector<Tensor>& t) {
        Tensor out = ops::add_positions(t[0], t[1], 1);
        EXPECT_FALSE(t[1].requires_grad());
        return out;
      },
      [&](const std::vector<Values>& v) {
        return add_positions_reference(v[0], v[1], batch, steps, d, 1);
      });
}

TEST(OpsAddPositions, LargeInputMatchesReference) {
  std::mt19937 rng(93);
  const int64_t batch = 9, steps = 40, d = 128, max_positions = 50, offset = 7;
  Values x = random_f32_values(batch * steps * d, rng),
         table = random_f32_values(max_positions * d, rng),
         g = random_f32_values(batch * steps * d, rng);
  Tensor tx = Tensor::from_floats({batch, steps, d}, testing::to_float_vector(x));
  Tensor tt = Tensor::from_floats({max_positions, d}, testing::to_float_vector(table));
  tx.set_requires_grad(true);
  tt.set_requires_grad(true);
  Tensor out = testing::forward_backward([&] { return ops::add_positions(tx, tt, offset); }, g);
  Values dtable(max_positions * d, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t j = 0; j < d; ++j) dtable[(offset + t) * d + j] += g[(b * steps + t) * d + j];
  testing::expect_close(out.to_floats(), add_positions_reference(x, table, batch, steps, d, offset),
                        1e-6, 0, "forward");
  EXPECT_EQ(tx.grad().to_floats(), testing::to_float_vector(g));
  testing::expect_close(tt.grad().to_floats(), dtable, 1e-5, 1e-6, "table gradient");
}

TEST(OpsAddPositions, BadArgumentsThrow) {
  Tensor x = Tensor::zeros({2, 3, 4});
  Tensor table = Tensor::zeros({5, 4});
  EXPECT_THROW(ops::add_positions(x, table, 3), Error);  // positions 3..5 need 6 rows
  EXPECT_THROW(ops::add_positions(x, table, -1), Error);
  EXPECT_THROW(ops::add_positions(x, Tensor::zeros({5, 3}), 0), Error);
  EXPECT_THROW(ops::add_positions(Tensor::zeros({6, 4}), table, 0), Error);
  EXPECT_THROW(ops::add_positions(x, Tensor::zeros({5, 4}, DType::i32), 0), Error);
  EXPECT_NO_THROW(ops::add_positions(x, table, 2));
}

}  // namespace
}  // namespace tfm::internal
