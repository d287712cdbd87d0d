// The fast paths of decoding: the output projection fused with log-softmax and the top-m selection
// (cpu::log_softmax_top) against log-softmax of the full logits in double; TransformerScorer's
// step_top against StepScorer's default (step() then a scan of the full rows); and the key/value
// cache's slot table (reordering without copies) against physical copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "test_decode_helpers.h"
#include "tfm/decode/transformer_scorer.h"
#include "tfm/kernels/cpu/log_softmax_top_cpu.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::random_sources;
using testing::tiny_decoder_config;

std::vector<float> normal_values(size_t n, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

struct TopEntry {
  double log_prob;
  int32_t token;
};

// log_softmax(h E^T) per row in double, then the m best (lower token first among equals), skipping
// `excluded`.
std::vector<std::vector<TopEntry>> reference_top(const std::vector<float>& h,
                                                 const std::vector<float>& e, int64_t rows,
                                                 int64_t d, int64_t vocab, int64_t m,
                                                 int64_t excluded) {
  std::vector<std::vector<TopEntry>> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> z(static_cast<size_t>(vocab));
    for (int64_t v = 0; v < vocab; ++v) {
      double dot = 0;
      for (int64_t i = 0; i < d; ++i)
        dot += static_cast<double>(h[static_cast<size_t>(r * d + i)]) *
               e[static_cast<size_t>(v * d + i)];
      z[static_cast<size_t>(v)] = dot;
    }
    const double max = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double x : z) sum += std::exp(x - max);
    std::vector<TopEntry> row;
    for (int64_t v = 0; v < vocab; ++v)
      if (v != excluded)
        row.push_back({z[static_cast<size_t>(v)] - max - std::log(sum), static_cast<int32_t>(v)});
    std::stable_sort(row.begin(), row.end(),
                     [](const TopEntry& a, const TopEntry& b) { return a.log_prob > b.log_prob; });
    row.resize(static_cast<size_t>(m));
    out.push_back(row);
  }
  return out;
}

// Several blocks and a partial last block (vocab 5003), for a few rows (wide blocks) and many
// (narrow ones), with and without an excluded token; every row's logits spread over several units
// so that the normaliser sums many terms.
TEST(LogSoftmaxTop, EqualsTheTopOfTheFullLogSoftmax) {
  std::mt19937_64 rng(41);
  const int64_t d = 24, vocab = 5003, m = 8;
  const std::vector<float> e = normal_values(static_cast<size_t>(vocab * d), rng, 0.5f);
  for (int64_t rows : {3, 70}) {
    for (int64_t excluded : {-1, 17}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + ", excluded " + std::to_string(excluded));
      const std::vector<float> h = normal_values(static_cast<size_t>(rows * d), rng, 1.0f);
      std::vector<float> values(static_cast<size_t>(rows * m));
      std::vector<int32_t> tokens(values.size()), counts(static_cast<size_t>(rows));
      cpu::LogSoftmaxTopArgs args;
      args.hidden = h.data();
      args.embedding = e.data();
      args.rows = rows;
      args.d = d;
      args.vocab = vocab;
      args.m = m;
      args.excluded = excluded;
      cpu::log_softmax_top(args, values.data(), tokens.data(), counts.data());
      auto want = reference_top(h, e, rows, d, vocab, m, excluded);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(counts[static_cast<size_t>(r)], m);
        for (int64_t i = 0; i < m; ++i) {
          const auto& w = want[static_cast<size_t>(r)][static_cast<size_t>(i)];
          EXPECT_EQ(tokens[static_cast<size_t>(r * m + i)], w.token)
              << "row " << r << ", rank " << i;
          EXPECT_NEAR(values[static_cast<size_t>(r * m + i)], w.log_prob, 1e-5) << "row " << r;
        }
        EXPECT_NE(tokens[static_cast<size_t>(r * m)], excluded);
      }
    }
  }
}

// Equal logits (duplicated embedding rows, in different blocks and threads' ranges): the lower
// token comes first, as the searches' tie-break wants.
TEST(LogSoftmaxTop, TiesGoToTheLowerToken) {
  std::mt19937_64 rng(42);
  const int64_t d = 8, vocab = 9000, rows = 2, m = 4;
  std::vector<float> e = normal_values(static_cast<size_t>(vocab * d), rng, 0.1f);
  std::vector<float> h = normal_values(static_cast<size_t>(rows * d), rng, 1.0f);
  // Token 8500's row is the largest; tokens 6000 and 100 get the same one.
  for (int64_t i = 0; i < d; ++i)
    e[static_cast<size_t>(8500 * d + i)] = 3.0f * h[static_cast<size_t>(i)];
  for (int64_t t : {6000, 100}) std::copy_n(e.begin() + 8500 * d, d, e.begin() + t * d);
  std::vector<float> values(rows * m);
  std::vector<int32_t> tokens(values.size()), counts(rows);
  cpu::LogSoftmaxTopArgs args;
  args.hidden = h.data();
  args.embedding = e.data();
  args.rows = rows;
  args.d = d;
  args.vocab = vocab;
  args.m = m;
  cpu::log_softmax_top(args, values.data(), tokens.data(), counts.data());
  EXPECT_EQ(tokens[0], 100);
  EXPECT_EQ(tokens[1], 6000);
  EXPECT_EQ(tokens[2], 8500);
  EXPECT_EQ(values[0], values[1]);
  EXPECT_EQ(values[1], values[2]);
  EXPECT_GT(values[2], values[3]);
}

// The bf16 path: equal to the f32 path on the bf16-rounded operands, up to the order of the f32
// accumulation.
TEST(LogSoftmaxTop, Bf16OperandsEqualF32OnRoundedValues) {
  std::mt19937_64 rng(43);
  const int64_t d = 32, vocab = 3000, rows = 5, m = 6;
  std::vector<float> e = normal_values(static_cast<size_t>(vocab * d), rng, 0.5f);
  std::vector<float> h = normal_values(static_cast<size_t>(rows * d), rng, 1.0f);
  std::vector<bf16> e16, h16;
  for (float& x : e) {
    e16.push_back(float_to_bf16(x));
    x = bf16_to_float(e16.back());
  }
  for (float& x : h) {
    h16.push_back(float_to_bf16(x));
    x = bf16_to_float(h16.back());
  }
  std::vector<float> values(rows * m);
  std::vector<int32_t> tokens(values.size()), counts(rows);
  cpu::LogSoftmaxTopArgs args;
  args.hidden = h16.data();
  args.embedding = e16.data();
  args.dtype = DType::bf16;
  args.rows = rows;
  args.d = d;
  args.vocab = vocab;
  args.m = m;
  cpu::log_softmax_top(args, values.data(), tokens.data(), counts.data());
  auto want = reference_top(h, e, rows, d, vocab, m, -1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(tokens[static_cast<size_t>(r * m + i)],
                want[static_cast<size_t>(r)][static_cast<size_t>(i)].token);
      EXPECT_NEAR(values[static_cast<size_t>(r * m + i)],
                  want[static_cast<size_t>(r)][static_cast<size_t>(i)].log_prob, 1e-5);
    }
}

// A scorer that is TransformerScorer except for step_top, which it leaves to StepScorer's default
// (step(), then a scan of every row).
class UnfusedScorer final : public decode::StepScorer {
 public:
  explicit UnfusedScorer(decode::TransformerScorer& inner) : inner_(inner) {}
  int64_t rows() const override { return inner_.rows(); }
  int64_t vocab_size() const override { return inner_.vocab_size(); }
  Tensor step(const std::vector<int32_t>& last) override { return inner_.step(last); }
  void select(const std::vector<int64_t>& rows) override { inner_.select(rows); }

 private:
  decode::TransformerScorer& inner_;
};

TEST(TransformerScorer, FusedStepTopEqualsTheTopOfStep) {
  ModelConfig config = tiny_decoder_config();
  config.vocab_size = 3000;  // several blocks of the fused product
  nn::Transformer model(config);
  model.init(44);
  auto sources = random_sources({4, 6}, static_cast<int32_t>(config.vocab_size), 45);
  std::vector<int32_t> ids{sources[0].begin(), sources[0].end()};
  ids.resize(6, config.pad_id);
  ids.insert(ids.end(), sources[1].begin(), sources[1].end());
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(Tensor::from_ints({2, 6}, ids), {4, 6}, ctx);
  const int64_t beam = 3, m = 6;
  decode::TransformerScorer fused(model, memory, {4, 6}, beam, 8),
      plain_inner(model, memory, {4, 6}, beam, 8);
  UnfusedScorer plain(plain_inner);
  std::vector<int32_t> last(6, config.bos_id);
  for (int step = 0; step < 4; ++step) {
    decode::StepTop a, b;
    const int32_t excluded = step == 0 ? config.eos_id : -1;
    fused.step_top(last, m, excluded, a);
    plain.step_top(last, m, excluded, b);
    ASSERT_EQ(a.counts, b.counts);
    EXPECT_EQ(a.tokens, b.tokens) << "step " << step;
    for (size_t i = 0; i < a.log_probs.size(); ++i)
      EXPECT_NEAR(a.log_probs[i], b.log_probs[i], 1e-5);
    // Continue every row with its second-best token, beams shuffled within their sentence.
    for (size_t r = 0; r < last.size(); ++r) last[r] = a.tokens[r * m + 1];
    std::vector<int64_t> rows{2, 0, 0, 4, 5, 3};
    std::vector<int32_t> next;
    for (int64_t r : rows) next.push_back(last[static_cast<size_t>(r)]);
    last = next;
    fused.select(rows);
    plain.select(rows);
  }
}

// TransformerScorer computes the first step once per source (every beam row starts from bos); its
// log-probabilities must equal the full state's, row for row, at that step and after the state is
// widened by select(). First tokens that differ within a source widen the state before the step.
TEST(TransformerScorer, FirstStepOncePerSourceEqualsTheFullBeam) {
  ModelConfig config = tiny_decoder_config();
  nn::Transformer model(config);
  model.init(47);
  auto sources = random_sources({3, 5}, static_cast<int32_t>(config.vocab_size), 48);
  std::vector<int32_t> ids{sources[0].begin(), sources[0].end()};
  ids.resize(5, config.pad_id);
  ids.insert(ids.end(), sources[1].begin(), sources[1].end());
  auto ctx = nn::ForwardContext::inference();
  Tensor memory = model.encode(Tensor::from_ints({2, 5}, ids), {3, 5}, ctx);
  const int64_t beam = 3;
  for (bool same_start : {true, false}) {
    SCOPED_TRACE(same_start ? "bos everywhere" : "different first tokens");
    decode::TransformerScorer scorer(model, memory, {3, 5}, beam, 6);
    nn::DecoderState full = model.start_decoding(memory, {3, 5}, beam, 6);
    std::vector<int32_t> last(6, config.bos_id);
    if (!same_start) last[4] = 7;
    const std::vector<std::vector<int64_t>> orders{{1, 0, 0, 5, 3, 3}, {2, 2, 1, 4, 3, 5}};
    for (size_t step = 0; step <= orders.size(); ++step) {
      std::vector<float> got = scorer.step(last).to_floats();
      Tensor logits = model.decode_step(Tensor::from_ints({6}, last), full);
      logits = ops::log_softmax(logits);
      std::vector<float> want = logits.to_floats();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << step;
      if (step == orders.size()) break;
      scorer.select(orders[step]);
      full.select(orders[step]);
      for (size_t r = 0; r < last.size(); ++r) last[r] = static_cast<int32_t>(5 + r + step);
    }
    EXPECT_EQ(scorer.state().beam, beam);
  }
}

// Reordering rewrites the slot table; the attention over it must equal the attention over a
// physical copy of the selected rows. Rows are reordered, repeated, dropped and, at the end,
// repeated beyond the buffer's rows (which copies); the buffers grow on the way. A bf16 cache reads
// as an f32 cache of the rounded values.
TEST(KeyValueCache, SlotTableEqualsPhysicalCopies) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::mt19937_64 rng(46);
    const int64_t width = 12, heads = 3;
    nn::KeyValueCache slotted = nn::KeyValueCache::with_capacity(5, 2, width, width, dtype);
    nn::KeyValueCache copied = nn::KeyValueCache::with_capacity(5, 2, width, width);
    auto random = [&](int64_t rows) {
      auto v = normal_values(static_cast<size_t>(rows * width), rng, 1.0f);
      if (dtype == DType::bf16)
        for (float& x : v) x = bf16_to_float(float_to_bf16(x));
      return Tensor::from_floats({rows, 1, width}, v);
    };
    const std::vector<std::vector<int64_t>> orders{
        {1, 1, 0, 4, 2}, {4, 3, 2, 1, 0}, {0, 0, 3}, {2, 1, 1}, {0, 1, 2, 2, 2, 1, 0}};
    for (size_t step = 0; step <= orders.size(); ++step) {
      const int64_t rows = slotted.rows();
      ASSERT_EQ(rows, copied.rows());
      Tensor k = random(rows), v = random(rows);
      slotted.append(k, v);
      copied.append(k, v);
      Tensor q = random(rows);
      ops::AttentionMask mask;
      std::vector<float> a = ops::attention_cached(q, slotted.keys, slotted.values, slotted.length,
                                                   heads, mask, nullptr, slotted.slots)
                                 .to_floats();
      std::vector<float> b =
          ops::attention_cached(q, copied.keys, copied.values, copied.length, heads, mask)
              .to_floats();
      ASSERT_EQ(a, b) << "step " << step;
      if (step == orders.size()) break;
      slotted.reorder(orders[step]);
      copied = copied.gather(orders[step]);
    }
    EXPECT_GT(slotted.capacity(), 2);
    EXPECT_EQ(slotted.rows(), 7);
    EXPECT_EQ(slotted.keys.dtype(), dtype);
  }
}

// Heads of 64 take a vectorised path (four keys per reduction, the output in registers; for a bf16
// cache, elements split into even and odd halves): it must equal ops::attention on dense copies of
// the used keys and values, for f32 and bf16 caches, key counts that are not multiples of four,
// padding and causal masks, and a slot table.
TEST(AttentionCached, HeadsOf64EqualTheDenseAttention) {
  const int64_t batch = 3, heads = 2, d = 64, capacity = 16;
  std::mt19937_64 rng(49);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (int64_t keys : {1, 7, 13}) {
      for (int64_t tq : {1, 3, 6}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + ", keys " + std::to_string(keys) +
                     ", queries " + std::to_string(tq));
        // Buffer rows 0..4; batch b reads position j from slot (b + j) % 5.
        const int64_t slots_rows = 5;
        std::vector<float> kc =
            normal_values(static_cast<size_t>(slots_rows * capacity * heads * d), rng, 1.0f);
        std::vector<float> vc = normal_values(kc.size(), rng, 1.0f);
        if (dtype == DType::bf16)
          for (auto* values : {&kc, &vc})
            for (float& x : *values) x = bf16_to_float(float_to_bf16(x));
        Tensor k_cache = Tensor::from_floats({slots_rows, capacity, heads * d}, kc);
        Tensor v_cache = Tensor::from_floats({slots_rows, capacity, heads * d}, vc);
        if (dtype == DType::bf16) {
          k_cache = ops::to_bf16(k_cache);
          v_cache = ops::to_bf16(v_cache);
        }
        std::vector<int32_t> table(static_cast<size_t>(batch * capacity));
        std::vector<float> k_dense, v_dense;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t j = 0; j < capacity; ++j) {
            const int64_t slot = (b + j) % slots_rows;
            table[static_cast<size_t>(b * capacity + j)] = static_cast<int32_t>(slot);
            if (j >= keys) continue;
            const auto at = kc.begin() + (slot * capacity + j) * heads * d;
            k_dense.insert(k_dense.end(), at, at + heads * d);
            const auto vat = vc.begin() + (slot * capacity + j) * heads * d;
            v_dense.insert(v_dense.end(), vat, vat + heads * d);
          }
        Tensor slots = Tensor::from_ints({batch, capacity}, table);
        Tensor k = Tensor::from_floats({batch, keys, heads * d}, k_dense);
        Tensor v = Tensor::from_floats({batch, keys, heads * d}, v_dense);
        Tensor q = Tensor::from_floats(
            {batch, tq, heads * d},
            normal_values(static_cast<size_t>(batch * tq * heads * d), rng, 0.3f));
        std::vector<ops::AttentionMask> masks(3);
        masks[1].key_lengths = {static_cast<int32_t>(keys), 1,
                                static_cast<int32_t>((keys + 1) / 2)};
        masks[2].causal = true;
        masks[2].query_offset = keys - tq;
        for (size_t i = 0; i < masks.size(); ++i) {
          if (masks[i].causal && keys < tq) continue;
          Tensor probs_cached, probs;
          std::vector<float> got = ops::attention_cached(q, k_cache, v_cache, keys, heads, masks[i],
                                                         &probs_cached, slots)
                                       .to_floats();
          std::vector<float> want =
              ops::attention(q, k, v, heads, masks[i], 0.0f, 0, &probs).to_floats();
          ASSERT_EQ(got.size(), want.size());
          for (size_t e = 0; e < got.size(); ++e)
            ASSERT_NEAR(got[e], want[e], 1e-5) << "mask " << i;
          std::vector<float> pc = probs_cached.to_floats(), p = probs.to_floats();
          for (size_t e = 0; e < p.size(); ++e) ASSERT_NEAR(pc[e], p[e], 1e-6) << "mask " << i;
        }
      }
    }
  }
}

// Several queries of a batch entry that see the same keys (the cross-attention's beam hypotheses):
// every output and probability must be the same bits as each query's attention alone, whatever
// the kernel does with them together, for 2 to 9 queries, with a slot table and padding.
TEST(AttentionCached, QueriesTogetherAreTheBitsOfEachAlone) {
  const int64_t batch = 3, heads = 2, d = 64, capacity = 11, keys = 9;
  std::mt19937_64 rng(53);
  Tensor k_cache = Tensor::from_floats(
      {batch + 1, capacity, heads * d},
      normal_values(static_cast<size_t>((batch + 1) * capacity * heads * d), rng, 1.0f));
  Tensor v_cache = Tensor::from_floats(
      k_cache.shape(), normal_values(static_cast<size_t>(k_cache.numel()), rng, 1.0f));
  std::vector<int32_t> table(static_cast<size_t>(batch * capacity));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 7) % (batch + 1));
  const Tensor slots = Tensor::from_ints({batch, capacity}, table);
  ops::AttentionMask mask;
  mask.key_lengths = {9, 4, 1};
  for (int64_t tq = 2; tq <= 9; ++tq) {
    SCOPED_TRACE("queries " + std::to_string(tq));
    std::vector<float> qv = normal_values(static_cast<size_t>(batch * tq * heads * d), rng, 0.5f);
    Tensor probs;
    const std::vector<float> together =
        ops::attention_cached(Tensor::from_floats({batch, tq, heads * d}, qv), k_cache, v_cache,
                              keys, heads, mask, &probs, slots)
            .to_floats();
    const std::vector<float> p = probs.to_floats();
    for (int64_t t = 0; t < tq; ++t) {
      std::vector<float> one;
      for (int64_t b = 0; b < batch; ++b)
        one.insert(one.end(), qv.begin() + (b * tq + t) * heads * d,
                   qv.begin() + (b * tq + t + 1) * heads * d);
      Tensor probs_alone;
      const std::vector<float> alone =
          ops::attention_cached(Tensor::from_floats({batch, 1, heads * d}, one), k_cache, v_cache,
                                keys, heads, mask, &probs_alone, slots)
              .to_floats();
      const std::vector<float> pa = probs_alone.to_floats();
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < heads * d; ++i)
          ASSERT_EQ(together[static_cast<size_t>((b * tq + t) * heads * d + i)],
                    alone[static_cast<size_t>(b * heads * d + i)])
              << "batch " << b << ", query " << t << ", element " << i;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t head = 0; head < heads; ++head)
          for (int64_t j = 0; j < keys; ++j)
            ASSERT_EQ(p[static_cast<size_t>(((b * heads + head) * tq + t) * keys + j)],
                      pa[static_cast<size_t>((b * heads + head) * keys + j)])
                << "batch " << b << ", head " << head << ", query " << t << ", key " << j;
    }
  }
}

}  // namespace
}  // namespace tfm::internal
