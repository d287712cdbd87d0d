// Token-budget batching: the padded budget, every pair once per epoch, determinism from (seed,
// epoch), skipped over-budget pairs, exact resumption from a saved state, and the batch tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "temp_dir.h"
#include "tfm/data/batcher.h"
#include "tfm/train/model_batch.h"

namespace tfm::internal::testing {
namespace {

using data::Batcher;
using data::BatcherOptions;
using data::BatchPlan;
using data::Corpus;

// `count` pairs of random ids (>= 4) with lengths 1..max_length, targets correlated with sources
// as in real translation data.
Corpus random_corpus(int count, int max_length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  for (int i = 0; i < count; ++i) {
    const int source_length = 1 + static_cast<int>(rng() % max_length);
    const int target_length = std::max(1, source_length + static_cast<int>(rng() % 7) - 3);
    std::vector<int32_t> source(source_length), target(target_length);
    for (auto& id : source) id = 4 + static_cast<int32_t>(rng() % 500);
    for (auto& id : target) id = 4 + static_cast<int32_t>(rng() % 500);
    pairs.emplace_back(std::move(source), std::move(target));
  }
  return Corpus::from_pairs(pairs);
}

std::vector<int64_t> flatten(const std::vector<BatchPlan>& plan) {
  std::vector<int64_t> pairs;
  for (const auto& batch : plan) pairs.insert(pairs.end(), batch.pairs.begin(), batch.pairs.end());
  return pairs;
}

void expect_same_plan(const std::vector<BatchPlan>& a, const std::vector<BatchPlan>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].pairs, b[i].pairs) << "batch " << i;
    EXPECT_EQ(a[i].source_width, b[i].source_width);
    EXPECT_EQ(a[i].target_width, b[i].target_width);
  }
}

// The procedure of data/batcher.h written plainly (a stable comparison sort, one swap at a time):
// the batcher's counting sort, prefetching shuffle and threads must give exactly its plans.
std::vector<BatchPlan> reference_plan(const Corpus& corpus, const BatcherOptions& options,
                                      uint64_t seed, int64_t epoch) {
  auto splitmix64 = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  auto draw_below = [](std::mt19937_64& rng, uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;)
      if (const uint64_t r = rng(); r >= threshold) return r % n;
  };
  auto shuffle = [&](auto& items, std::mt19937_64& rng) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[draw_below(rng, i)]);
  };
  std::vector<int64_t> order;
  int64_t tokens = 0;
  for (int64_t i = 0; i < corpus.size(); ++i) {
    const int64_t alone = corpus.source_length(i) + corpus.target_length(i) + 1;
    if (alone > options.max_tokens) continue;
    order.push_back(i);
    tokens += alone;
  }
  const double pairs_per_batch =
      static_cast<double>(options.max_tokens) / (static_cast<double>(tokens) / order.size());
  const auto window = static_cast<size_t>(std::max(1.0, pairs_per_batch * options.window_batches));
  std::mt19937_64 rng(splitmix64(seed) ^ splitmix64(static_cast<uint64_t>(epoch) + 0x5eed));
  shuffle(order, rng);
  auto widths = [&corpus](int64_t i) {
    const int64_t s = corpus.source_length(i), t = corpus.target_length(i) + 1;
    return std::tuple(std::max(s, t), s, t);
  };
  std::vector<BatchPlan> batches;
  for (size_t start = 0; start < order.size(); start += window) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(start);
    const auto last =
        order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), start + window));
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return widths(a) < widths(b); });
    BatchPlan current;
    for (auto it = first; it != last; ++it) {
      const auto [longer, s, t] = widths(*it);
      const int64_t rows = static_cast<int64_t>(current.pairs.size()) + 1;
      if (!current.pairs.empty() &&
          rows * (std::max(current.source_width, s) + std::max(current.target_width, t)) >
              options.max_tokens) {
        batches.push_back(std::move(current));
        current = BatchPlan{};
      }
      current.pairs.push_back(static_cast<uint32_t>(*it));
      current.source_width = std::max(current.source_width, s);
      current.target_width = std::max(current.target_width, t);
    }
    if (!current.pairs.empty()) batches.push_back(std::move(current));
  }
  shuffle(batches, rng);
  return batches;
}

TEST(Batcher, PlansEqualThePlainProcedure) {
  // Many equal widths (short pairs), so the order of ties matters.
  const Corpus corpus = random_corpus(20000, 12, 5);
  for (const int64_t window : {1, 7, 100}) {
    BatcherOptions options;
    options.max_tokens = 300;
    options.window_batches = window;
    const Batcher batcher(corpus, options, 99);
    for (int64_t epoch = 0; epoch < 2; ++epoch)
      expect_same_plan(batcher.epoch_plan(epoch), reference_plan(corpus, options, 99, epoch));
  }
}

TEST(Batcher, BatchesFitTheBudgetAndCoverEveryPairOnce) {
  const Corpus corpus = random_corpus(3000, 60, 1);
  BatcherOptions options;
  options.max_tokens = 2000;
  options.window_batches = 20;
  const Batcher batcher(corpus, options, 42);
  EXPECT_EQ(batcher.skipped_pairs(), 0);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto plan = batcher.epoch_plan(epoch);
    int64_t real = 0, padded = 0;
    for (const BatchPlan& batch : plan) {
      ASSERT_FALSE(batch.pairs.empty());
      int64_t s = 0, t = 0;
      for (int64_t i : batch.pairs) {
        s = std::max(s, corpus.source_length(i));
        t = std::max(t, corpus.target_length(i) + 1);
        real += corpus.source_length(i) + corpus.target_length(i) + 1;
      }
      EXPECT_EQ(batch.source_width, s);
      EXPECT_EQ(batch.target_width, t);
      EXPECT_LE(batch.padded_tokens(), options.max_tokens);
      padded += batch.padded_tokens();
    }
    std::vector<int64_t> pairs = flatten(plan);
    std::sort(pairs.begin(), pairs.end());
    std::vector<int64_t> all(corpus.size());
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(pairs, all) << "epoch " << epoch;
    // Sorting within windows keeps padding low (random order would waste about a third).
    EXPECT_GT(static_cast<double>(real) / static_cast<double>(padded), 0.9);
    // Batches are full: the budget is mostly used.
    EXPECT_GT(static_cast<double>(padded) / static_cast<double>(plan.size()), 0.8 * 2000);
  }
}

TEST(Batcher, PlansDependOnlyOnSeedAndEpoch) {
  const Corpus corpus = random_corpus(2000, 40, 2);
  BatcherOptions options;
  options.max_tokens = 1500;
  const Batcher a(corpus, options, 7), b(corpus, options, 7), c(corpus, options, 8);
  expect_same_plan(a.epoch_plan(0), b.epoch_plan(0));
  expect_same_plan(a.epoch_plan(5), b.epoch_plan(5));
  EXPECT_NE(flatten(a.epoch_plan(0)), flatten(a.epoch_plan(1)));
  EXPECT_NE(flatten(a.epoch_plan(0)), flatten(c.epoch_plan(0)));
  // Batch order differs, not only the pairs inside batches.
  EXPECT_NE(a.epoch_plan(0).front().pairs, a.epoch_plan(1).front().pairs);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint(), c.fingerprint());
}

TEST(Batcher, PairsOverTheBudgetAreSkippedAndCounted) {
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> pairs;
  std::mt19937_64 rng(3);
  int64_t too_long = 0;
  for (int i = 0; i < 500; ++i) {
    const int64_t length = 1 + static_cast<int64_t>(rng() % 80);
    // Alone a pair costs source + target + 1 tokens.
    too_long += length + length + 1 > 120;
    pairs.emplace_back(std::vector<int32_t>(length, 9), std::vector<int32_t>(length, 11));
  }
  ASSERT_GT(too_long, 50);
  const Corpus corpus = Corpus::from_pairs(pairs);
  BatcherOptions options;
  options.max_tokens = 120;
  const Batcher batcher(corpus, options, 1);
  EXPECT_EQ(batcher.skipped_pairs(), too_long);
  EXPECT_EQ(batcher.pairs_per_epoch(), 500 - too_long);
  const auto plan = batcher.epoch_plan(0);
  const auto used = flatten(plan);
  EXPECT_EQ(static_cast<int64_t>(used.size()), 500 - too_long);
  for (int64_t i : used) EXPECT_LE(2 * corpus.source_length(i) + 1, 120);

  options.max_tokens = 2;
  expect_error([&] { Batcher(corpus, options, 1); }, {"no sentence pair", "budget of 2 tokens"});
}

TEST(Batcher, MaxPairsAndUnshuffledOrder) {
  const Corpus corpus = random_corpus(800, 30, 4);
  BatcherOptions options;
  options.max_tokens = 4000;
  options.max_pairs = 16;
  options.shuffle = false;
  const Batcher batcher(corpus, options, 5);
  const auto plan = batcher.epoch_plan(0);
  int64_t previous = 0;
  for (const BatchPlan& batch : plan) {
    EXPECT_LE(batch.pairs.size(), 16u);
    for (int64_t i : batch.pairs) {
      // Sorted by the longer side throughout.
      const int64_t longer = std::max(corpus.source_length(i), corpus.target_length(i) + 1);
      EXPECT_GE(longer, previous);
      previous = longer;
    }
  }
  expect_same_plan(plan, batcher.epoch_plan(3));
}

TEST(Batcher, MakesRightPaddedBatchesWithBosAndEos) {
  const Corpus corpus = Corpus::from_pairs({{{10, 11, 12}, {20, 21}}, {{13}, {22, 23, 24, 25}}});
  const Batcher batcher(corpus, BatcherOptions{}, 1);
  BatchPlan plan;
  plan.pairs = {1, 0};
  plan.source_width = 3;
  plan.target_width = 5;
  const data::TokenBatch ids = batcher.make_batch(plan);
  EXPECT_EQ(ids.rows, 2);
  EXPECT_EQ(ids.source_width, 3);
  EXPECT_EQ(ids.target_width, 5);
  EXPECT_EQ(ids.src, (std::vector<int32_t>{13, 0, 0, 10, 11, 12}));
  // The model's tensors of it (train/model_batch.h): the same ids, lengths and token counts.
  const nn::Batch batch = model_batch(ids);
  EXPECT_EQ(batch.src.to_ints(), (std::vector<int32_t>{13, 0, 0, 10, 11, 12}));
  EXPECT_EQ(batch.tgt_in.to_ints(), (std::vector<int32_t>{2, 22, 23, 24, 25, 2, 20, 21, 0, 0}));
  EXPECT_EQ(batch.tgt_out.to_ints(), (std::vector<int32_t>{22, 23, 24, 25, 3, 20, 21, 3, 0, 0}));
  EXPECT_EQ(batch.src_lengths, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(batch.src_tokens, 4);
  EXPECT_EQ(batch.tgt_tokens, 8);
  // A model whose decoder starts from another id (config decoder_start_id) gets it in place of bos.
  const nn::Batch started = model_batch(ids, 1);
  EXPECT_EQ(started.tgt_in.to_ints(), (std::vector<int32_t>{1, 22, 23, 24, 25, 1, 20, 21, 0, 0}));
  EXPECT_EQ(started.tgt_out.to_ints(), batch.tgt_out.to_ints());

  // Every batch of an epoch, against the corpus.
  const Corpus random = random_corpus(400, 25, 6);
  BatcherOptions options;
  options.max_tokens = 600;
  const Batcher random_batcher(random, options, 9);
  for (const BatchPlan& p : random_batcher.epoch_plan(0)) {
    const nn::Batch b = model_batch(random_batcher.make_batch(p));
    ASSERT_EQ(b.size(), static_cast<int64_t>(p.pairs.size()));
    EXPECT_LE(b.size() * (b.src.dim(1) + b.tgt_in.dim(1)), 600);
    const auto src = b.src.to_ints(), out = b.tgt_out.to_ints(), in = b.tgt_in.to_ints();
    for (int64_t row = 0; row < b.size(); ++row) {
      const int64_t pair = p.pairs[row];
      const auto s = random.source(pair), t = random.target(pair);
      EXPECT_EQ(b.src_lengths[row], static_cast<int32_t>(s.size()));
      EXPECT_TRUE(std::equal(s.begin(), s.end(), src.begin() + row * b.src.dim(1)));
      EXPECT_EQ(in[row * b.tgt_in.dim(1)], 2);
      EXPECT_TRUE(std::equal(t.begin(), t.end(), in.begin() + row * b.tgt_in.dim(1) + 1));
      EXPECT_TRUE(std::equal(t.begin(), t.end(), out.begin() + row * b.tgt_out.dim(1)));
      EXPECT_EQ(out[row * b.tgt_out.dim(1) + t.size()], 3);
    }
  }
}

TEST(Batcher, RestoredStateContinuesWithTheSameBatches) {
  const Corpus corpus = random_corpus(600, 30, 7);
  BatcherOptions options;
  options.max_tokens = 900;
  Batcher original(corpus, options, 11);
  const int64_t per_epoch = original.batches_in_epoch();
  ASSERT_GT(per_epoch, 10);
  // Stop mid-epoch 1.
  for (int64_t i = 0; i < per_epoch + 5; ++i) original.next();
  const Batcher::State saved = original.state();
  EXPECT_EQ(saved, (Batcher::State{1, 5}));

  Batcher resumed(corpus, options, 11);
  resumed.restore(saved);
  // Through the end of epoch 1 and into epoch 2.
  for (int64_t i = 0; i < per_epoch + 3; ++i) {
    const Batcher::State at = original.state();
    const nn::Batch expected = model_batch(original.next());
    const nn::Batch got = model_batch(resumed.next());
    ASSERT_EQ(got.src.to_ints(), expected.src.to_ints()) << "batch " << i;
    ASSERT_EQ(got.tgt_in.to_ints(), expected.tgt_in.to_ints()) << "batch " << i;
    ASSERT_EQ(got.tgt_out.to_ints(), expected.tgt_out.to_ints()) << "batch " << i;
    ASSERT_EQ(resumed.state(), original.state()) << "after " << at.epoch << "/" << at.batch;
  }
  EXPECT_EQ(resumed.state().epoch, 2);

  // A state at the end of an epoch moves to the next epoch's first batch.
  Batcher end(corpus, options, 11);
  end.restore({0, per_epoch});
  Batcher fresh(corpus, options, 11);
  fresh.restore({1, 0});
  EXPECT_EQ(end.next().src, fresh.next().src);
  EXPECT_EQ(end.state(), (Batcher::State{1, 1}));

  expect_error([&] { end.restore({0, per_epoch + 1}); }, {"past the epoch's", "batches"});
  expect_error([&] { end.restore({-1, 0}); }, {"negative"});
}

}  // namespace
}  // namespace tfm::internal::testing
