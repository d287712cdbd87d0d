// ops::attention against a double-precision reference (same masks, same dropout mask from the
// kernel's hash) and finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "gradcheck.h"
#include "tfm/kernels/cpu/attention_cpu.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::check_op;
using testing::Input;
using testing::random_values;
using testing::Values;

struct Case {
  int64_t batch, tq, tk;
  int heads;
  int64_t dk, dv;  // per head
  ops::AttentionMask mask;
  float dropout = 0.0f;
  uint64_t seed = 0;
};

// Whether query t of batch b may attend to key j.
bool visible(const Case& c, int64_t b, int64_t t, int64_t j) {
  if (!c.mask.key_lengths.empty() && j >= c.mask.key_lengths[b]) return false;
  if (c.mask.causal && j > t + c.mask.query_offset) return false;
  return true;
}

// The attention weights [B, h, Tq, Tk] before dropout, in double.
Values reference_probs(const Case& c, const Values& q, const Values& k) {
  const int64_t h = c.heads, wq = h * c.dk;
  Values p(static_cast<size_t>(c.batch * h * c.tq * c.tk), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t head = 0; head < h; ++head)
      for (int64_t t = 0; t < c.tq; ++t) {
        double* row = p.data() + ((b * h + head) * c.tq + t) * c.tk;
        double max = -INFINITY;
        for (int64_t j = 0; j < c.tk; ++j) {
          if (!visible(c, b, t, j)) continue;
          double s = 0;
          for (int64_t d = 0; d < c.dk; ++d)
            s +=
                q[(b * c.tq + t) * wq + head * c.dk + d] * k[(b * c.tk + j) * wq + head * c.dk + d];
          row[j] = s / std::sqrt(static_cast<double>(c.dk));
          max = std::max(max, row[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < c.tk; ++j) {
          row[j] = visible(c, b, t, j) ? std::exp(row[j] - max) : 0.0;
          sum += row[j];
        }
        for (int64_t j = 0; j < c.tk; ++j) row[j] /= sum;
      }
  return p;
}

// softmax(q k^T / sqrt(dk) + mask), dropped with the kernel's mask, times v: [B, Tq, h*dv].
Values reference_attention(const Case& c, const Values& q, const Values& k, const Values& v) {
  Values p = reference_probs(c, q, k);
  if (c.dropout > 0.0f) {
    for (size_t i = 0; i < p.size(); ++i)
      p[i] = cpu::attention_dropout_keep(c.seed, i, c.dropout) ? p[i] / (1.0 - c.dropout) : 0.0;
  }
  const int64_t h = c.heads, wv = h * c.dv;
  Values out(static_cast<size_t>(c.batch * c.tq * wv), 0.0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t head = 0; head < h; ++head)
      for (int64_t t = 0; t < c.tq; ++t)
        for (int64_t e = 0; e < c.dv; ++e) {
          double s = 0;
          for (int64_t j = 0; j < c.tk; ++j)
            s += p[((b * h + head) * c.tq + t) * c.tk + j] *
                 v[(b * c.tk + j) * wv + head * c.dv + e];
          out[(b * c.tq + t) * wv + head * c.dv + e] = s;
        }
  return out;
}

void check_attention(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  // Scores of a few units make the softmax far from uniform, so its gradient is not trivial.
  Input q{{c.batch, c.tq, c.heads * c.dk},
          random_values(c.batch * c.tq * c.heads * c.dk, rng, -2, 2)};
  Input k{{c.batch, c.tk, c.heads * c.dk},
          random_values(c.batch * c.tk * c.heads * c.dk, rng, -2, 2)};
  Input v{{c.batch, c.tk, c.heads * c.dv}, random_values(c.batch * c.tk * c.heads * c.dv, rng)};
  check_op(
      {q, k, v},
      [&](const std::vector<Tensor>& t) {
        return ops::attention(t[0], t[1], t[2], c.heads, c.mask, c.dropout, c.seed);
      },
      [&](const std::vector<Values>& x) { return reference_attention(c, x[0], x[1], x[2]); });
}

TEST(OpsAttention, HeadsOneTwoFourWithDkDifferentFromDv) {
  for (int heads : {1, 2, 4}) {
    SCOPED_TRACE("heads " + std::to_string(heads));
    check_attention({2, 4, 4, heads, 3, 2, {}}, 100 + heads);
  }
}

TEST(OpsAttention, CrossAttentionWithKeyPadding) {
  Case c{3, 2, 5, 2, 3, 4, {}};
  c.mask.key_lengths = {5, 2, 4};
  check_attention(c, 110);
}

TEST(OpsAttention, Causal) {
  Case c{2, 5, 5, 2, 2, 3, {}};
  c.mask.causal = true;
  check_attention(c, 120);
  c.mask.key_lengths = {5, 3};  // causal and padding together
  check_attention(c, 121);
}

TEST(OpsAttention, CausalWithQueryOffsetAndFewerQueries) {
  // Three new queries at positions 2, 3, 4 of a five-key sequence (incremental decoding).
  Case c{2, 3, 5, 2, 3, 2, {}};
  c.mask.causal = true;
  c.mask.query_offset = 2;
  check_attention(c, 130);
}

// Widths and lengths that take every path of the CPU's tile kernels (attention_tiles_cpu.cc): heads
// of 48 (blocks of 32 and 16 columns; three 16 x 16 transposes a tile) and 37 (a tail of 5
// columns), 7 queries (a block of 4 rows, then single rows), 21 keys (a whole block of 16 and part
// of one).
TEST(OpsAttention, WideHeadsOverSeveralKeyBlocks) {
  Case padded{2, 7, 21, 2, 48, 37, {}};
  padded.mask.key_lengths = {21, 13};
  check_attention(padded, 150);
  Case causal{2, 21, 21, 1, 48, 37, {}};
  causal.mask.causal = true;
  causal.dropout = 0.2f;
  causal.seed = 42;
  check_attention(causal, 151);
}

TEST(OpsAttention, DropoutWithFixedSeed) {
  Case c{2, 4, 5, 2, 3, 3, {}};
  c.mask.key_lengths = {5, 3};
  c.dropout = 0.3f;
  c.seed = 987654321;
  check_attention(c, 140);
  // The mask really drops weights, and another seed drops others.
  int dropped = 0, differ = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    dropped += !cpu::attention_dropout_keep(c.seed, i, c.dropout);
    differ += cpu::attention_dropout_keep(c.seed, i, c.dropout) !=
              cpu::attention_dropout_keep(c.seed + 1, i, c.dropout);
  }
  EXPECT_NEAR(dropped, 300, 60);
  EXPECT_GT(differ, 200);
}

TEST(OpsAttention, SameTensorAsQueryKeyAndValueAccumulatesGradients) {
  Case c{2, 3, 3, 2, 2, 2, {}};
  c.mask.causal = true;
  std::mt19937 rng(150);
  Input x{{2, 3, 4}, random_values(24, rng, -2, 2)};
  check_op(
      {x},
      [&](const std::vector<Tensor>& t) { return ops::attention(t[0], t[0], t[0], 2, c.mask); },
      [&](const std::vector<Values>& v) { return reference_attention(c, v[0], v[0], v[0]); });
}

TEST(OpsAttention, ProbsOutRowsSumToOneWithZerosOnMaskedKeys) {
  Case c{2, 3, 4, 2, 3, 2, {}};
  c.mask.key_lengths = {4, 2};
  c.mask.causal = true;
  c.mask.query_offset = 1;
  std::mt19937 rng(160);
  Values q = random_values(2 * 3 * 6, rng, -2, 2), k = random_values(2 * 4 * 6, rng, -2, 2),
         v = random_values(2 * 4 * 4, rng);
  auto tensor = [](const Shape& s, const Values& x) {
    return Tensor::from_floats(s, std::vector<float>(x.begin(), x.end()));
  };
  Tensor probs;
  ops::attention(tensor({2, 3, 6}, q), tensor({2, 4, 6}, k), tensor({2, 4, 4}, v), 2, c.mask, 0.5f,
                 7, &probs);
  ASSERT_EQ(probs.shape(), (Shape{2, 2, 3, 4}));
  std::vector<float> p = probs.to_floats();
  testing::expect_close(p, reference_probs(c, q, k), 1e-5, 1e-6, "probs (before dropout)");
  for (int64_t row = 0; row < 2 * 2 * 3; ++row) {
    int64_t b = row / 6, t = row % 3;
    double sum = 0;
    for (int64_t j = 0; j < 4; ++j) {
      float w = p[static_cast<size_t>(row * 4 + j)];
      if (!visible(c, b, t, j)) {
        EXPECT_EQ(w, 0.0f) << "row " << row << " key " << j;
      }
      sum += w;
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << row;
  }
}

// Sequences longer than any block of the kernel (the parser's trees run to 573 tokens).
TEST(OpsAttention, LongSequences) {
  ops::AttentionMask padded;
  padded.key_lengths = {290, 300};
  check_attention({2, 5, 300, 2, 4, 3, padded}, 3);
  ops::AttentionMask causal;
  causal.causal = true;
  check_attention({1, 280, 280, 1, 3, 2, causal}, 4);
}

TEST(OpsAttention, BadShapesAndMasksThrow) {
  Tensor q = Tensor::zeros({2, 3, 8}), k = Tensor::zeros({2, 5, 8}), v = Tensor::zeros({2, 5, 4});
  ops::AttentionMask none;
  EXPECT_NO_THROW(ops::attention(q, k, v, 2, none));
  EXPECT_THROW(ops::attention(q, k, v, 3, none), Error);  // 8 does not split into 3 heads
  EXPECT_THROW(ops::attention(q, Tensor::zeros({2, 5, 6}), v, 2, none), Error);  // q/k widths
  EXPECT_THROW(ops::attention(q, k, Tensor::zeros({2, 4, 4}), 2, none), Error);  // k/v lengths
  EXPECT_THROW(ops::attention(q, Tensor::zeros({1, 5, 8}), v, 2, none), Error);  // batch
  EXPECT_THROW(ops::attention(q.view({6, 8}), k, v, 2, none), Error);            // rank
  ops::AttentionMask zero_length{{5, 0}};
  EXPECT_THROW(ops::attention(q, k, v, 2, zero_length), Error);
  ops::AttentionMask too_long{{5, 6}};
  EXPECT_THROW(ops::attention(q, k, v, 2, too_long), Error);
  ops::AttentionMask wrong_count{{5}};
  EXPECT_THROW(ops::attention(q, k, v, 2, wrong_count), Error);
  ops::AttentionMask negative_offset{{}, true, -1};
  EXPECT_THROW(ops::attention(q, k, v, 2, negative_offset), Error);
  EXPECT_THROW(ops::attention(q, k, v, 2, none, 1.0f), Error);
  try {
    ops::attention(q, k, Tensor::zeros({2, 4, 4}), 2, none);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2, 4, 4]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tfm::internal
