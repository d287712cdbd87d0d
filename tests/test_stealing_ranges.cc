// How the decoding step's short products share their work among threads that need not run at one
// speed (kernels/cpu/stealing_ranges.h): every item is taken exactly once, its owner takes its
// range in ascending order, a thread that runs out (or is missing from the team) has its items
// taken by the others, and a slow thread's items go to the fast one; TopK's list does not depend
// on the order of its input (ties: the lower index first); and log_softmax_top gives the same bits
// for any number of threads, whichever thread takes a block.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "tfm/kernels/cpu/log_softmax_top_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/stealing_ranges.h"
#include "tfm/kernels/cpu/top_k_cpu.h"

namespace tfm::internal {
namespace {

using cpu::StealingRanges;

TEST(StealingRanges, OwnersTakeTheirRangesInOrderAndTheRestIsStolenFromTheEnd) {
  StealingRanges work(10, 3);  // ranges [0, 3), [3, 6), [6, 10)
  EXPECT_EQ(work.next(0), 0);
  EXPECT_EQ(work.next(0), 1);
  EXPECT_EQ(work.next(1), 3);
  EXPECT_EQ(work.next(0), 2);
  // Thread 0's range is empty: it takes the last item of the fullest range, thread 2's.
  EXPECT_EQ(work.next(0), 9);
  EXPECT_EQ(work.next(2), 6);
  // [4, 6) and [7, 9) left: the first of the fullest ranges loses its last item.
  EXPECT_EQ(work.next(0), 5);
  // A thread past the team (or a larger team than announced) only takes from the others.
  EXPECT_EQ(work.next(5), 8);
  std::vector<int64_t> rest;
  for (int64_t item = work.next(1); item >= 0; item = work.next(1)) rest.push_back(item);
  EXPECT_EQ(rest, (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(work.next(2), -1);
  EXPECT_EQ(work.next(0), -1);
}

TEST(StealingRanges, WithoutStealingEachThreadTakesItsOwnRangeOnly) {
  StealingRanges work(7, 2, /*steal=*/false);  // [0, 3), [3, 7)
  std::vector<int64_t> first;
  for (int64_t item = work.next(0); item >= 0; item = work.next(0)) first.push_back(item);
  EXPECT_EQ(first, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(work.next(3), -1);
  EXPECT_EQ(work.next(1), 3);
  StealingRanges none(0, 4);
  EXPECT_EQ(none.next(0), -1);
  EXPECT_THROW(StealingRanges(-1, 2), Error);
  EXPECT_THROW(StealingRanges(5, 0), Error);
}

// Real threads: every item exactly once, whatever the team; with one thread slowed down, the
// others take most of its range.
TEST(StealingRanges, ASlowThreadsItemsGoToTheOthersAndNoneTwice) {
  const int saved = omp_get_max_threads();
  for (const int team : {1, 2, 3, 4}) {
    const int64_t items = 2000;
    StealingRanges work(items, 4);  // a team of `team` for 4 announced threads
    std::vector<int> taken_by(static_cast<size_t>(items), -1);
    std::vector<int64_t> count(4, 0);
#pragma omp parallel num_threads(team)
    {
      const int thread = omp_get_thread_num();
      for (int64_t item = work.next(thread); item >= 0; item = work.next(thread)) {
#pragma omp atomic write
        taken_by[static_cast<size_t>(item)] = thread;
#pragma omp atomic update
        count[static_cast<size_t>(thread)] += 1;
      }
    }
    SCOPED_TRACE(testing::Message() << "team " << team);
    EXPECT_EQ(std::count(taken_by.begin(), taken_by.end(), -1), 0);
    int64_t total = 0;
    for (int64_t c : count) total += c;
    EXPECT_EQ(total, items);  // and since none is left untaken, none was taken twice
  }
  // Thread 1 sleeps 2 ms on each item of its 20: thread 0 ends its own in far less, then takes
  // from thread 1's end, so thread 1 does only a few.
  StealingRanges work(40, 2);
  std::vector<int64_t> count(2, 0);
#pragma omp parallel num_threads(2)
  {
    const int thread = omp_get_thread_num();
    for (int64_t item = work.next(thread); item >= 0; item = work.next(thread)) {
      if (thread == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ++count[static_cast<size_t>(thread)];
    }
  }
  if (omp_get_max_threads() >= 2) {
    EXPECT_EQ(count[0] + count[1], 40);
    EXPECT_GT(count[0], 30) << "thread 1 did " << count[1];
  }
  omp_set_num_threads(saved);
}

TEST(TopK, TheListDoesNotDependOnTheOrderOfItsInput) {
  // Values with many ties, -inf and NaN; m 5 of 60 pairs.
  std::mt19937 rng(3);
  std::vector<std::pair<float, int32_t>> pairs;
  for (int32_t i = 0; i < 60; ++i)
    pairs.push_back({static_cast<float>(static_cast<int>(rng() % 7)), i});
  pairs[10].first = std::numeric_limits<float>::infinity();
  pairs[11].first = -std::numeric_limits<float>::infinity();
  pairs[12].first = std::numeric_limits<float>::quiet_NaN();
  auto top_of = [](const std::vector<std::pair<float, int32_t>>& input) {
    std::vector<float> values(5);
    std::vector<int32_t> indices(5);
    cpu::TopK top{values.data(), indices.data(), 5, 0};
    for (const auto& [v, i] : input) top.insert(v, i);
    indices.resize(static_cast<size_t>(top.count));
    return indices;
  };
  const std::vector<int32_t> in_order = top_of(pairs);
  // +inf first, then the 6s by ascending index.
  std::vector<int32_t> want{10};
  for (const auto& [v, i] : pairs)
    if (v == 6.0f && want.size() < 5) want.push_back(i);
  ASSERT_EQ(want.size(), 5u);
  EXPECT_EQ(in_order, want);
  for (int shuffle = 0; shuffle < 20; ++shuffle) {
    std::shuffle(pairs.begin(), pairs.end(), rng);
    EXPECT_EQ(top_of(pairs), want);
  }
  // Scanning blocks of a row in any order, as log_softmax_top's threads do, gives the list of one
  // scan of the whole row.
  std::vector<float> row(200);
  for (float& v : row) v = static_cast<float>(static_cast<int>(rng() % 5));
  std::vector<float> a_values(6), b_values(6);
  std::vector<int32_t> a_indices(6), b_indices(6);
  cpu::TopK whole{a_values.data(), a_indices.data(), 6, 0};
  whole.scan(row.data(), 200, 0, 7);
  cpu::TopK blocks{b_values.data(), b_indices.data(), 6, 0};
  for (const int64_t first : {150, 100, 0, 50}) blocks.scan(row.data() + first, 50, first, 7);
  EXPECT_EQ(blocks.count, 6);
  EXPECT_EQ(b_indices, a_indices);
  EXPECT_EQ(b_values, a_values);
  EXPECT_EQ(a_values[0], 4.0f);
}

// A row of equal values (as an untrained output layer gives), scanned whole, in blocks in rising
// order (where a full list compares strictly) and in falling order (where a later block's lower
// indices must still enter): the lowest indices, in order, every time.
TEST(TopK, EqualValuesKeepTheLowestIndicesWhateverTheBlocksOrder) {
  std::vector<float> row(260, 0.5f);
  row[3] = -std::numeric_limits<float>::infinity();
  for (const std::vector<int64_t>& firsts :
       {std::vector<int64_t>{0}, {0, 64, 128, 192}, {192, 128, 64, 0}, {128, 0, 192, 64}}) {
    std::vector<float> values(4);
    std::vector<int32_t> indices(4);
    cpu::TopK top{values.data(), indices.data(), 4, 0};
    for (const int64_t first : firsts) {
      const int64_t n = firsts.size() == 1 ? 260 : (first == 192 ? 68 : 64);
      top.scan(row.data() + first, n, first, 1);
    }
    EXPECT_EQ(top.count, 4);
    EXPECT_EQ(indices, (std::vector<int32_t>{0, 2, 4, 5})) << "first block " << firsts.front();
    EXPECT_EQ(values, std::vector<float>(4, 0.5f));
  }
}

// log_softmax_top over an embedding plain and packed per block (the decoding step's), a partial
// last block, with ties across blocks: the same bits with 1, 2 and 3 threads.
TEST(LogSoftmaxTop, TheSameBitsForAnyNumberOfThreads) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t d = 32, vocab = 5000, rows = 9, m = 6, block = 512;
  std::vector<float> e(static_cast<size_t>(vocab * d)), h(static_cast<size_t>(rows * d));
  for (float& v : e) v = 0.3f * normal(rng);
  for (float& v : h) v = normal(rng);
  // Tokens 4900, 2100 and 300 share an embedding row, the largest logit of row 0.
  for (int64_t i = 0; i < d; ++i) e[static_cast<size_t>(4900 * d + i)] = 2.0f * h[i];
  for (int64_t t : {2100, 300}) std::copy_n(e.begin() + 4900 * d, d, e.begin() + t * d);
  std::vector<cpu::PackedWeight> packed;
  packed.reserve(static_cast<size_t>((vocab + block - 1) / block));
  for (int64_t first = 0; first < vocab; first += block)
    packed.emplace_back(e.data() + first * d, std::min(block, vocab - first), d, DType::f32);
  std::vector<const kernels::PackedForm*> forms;
  for (const auto& p : packed) forms.push_back(&p);

  // A bias of -8 on all but every 500th token: the normaliser then sums thousands of small terms
  // and a few near 1, so that log(sum) is small and the order of the sum shows in its last bits.
  std::vector<float> bias(static_cast<size_t>(vocab), -8.0f);
  for (int64_t t = 0; t < vocab; t += 500) bias[static_cast<size_t>(t)] = 0.0f;

  const int saved = omp_get_max_threads();
  for (const int setting : {0, 1, 2}) {
    const bool use_packed = setting == 1;
    SCOPED_TRACE(setting == 0 ? "plain embedding"
                 : use_packed ? "packed blocks"
                              : "plain embedding, a bias");
    cpu::LogSoftmaxTopArgs args;
    args.hidden = h.data();
    args.rows = rows;
    args.d = d;
    args.vocab = vocab;
    args.block = block;
    args.m = m;
    args.excluded = 11;
    if (use_packed)
      args.packed_blocks = forms.data();
    else
      args.embedding = e.data();
    if (setting == 2) args.bias = bias.data();
    auto run = [&](int threads) {
      omp_set_num_threads(threads);
      std::vector<float> values(static_cast<size_t>(rows * m)), norms(static_cast<size_t>(rows));
      std::vector<int32_t> tokens(values.size()), counts(static_cast<size_t>(rows));
      cpu::log_softmax_top(args, values.data(), tokens.data(), counts.data(), norms.data());
      return std::make_tuple(values, tokens, counts, norms);
    };
    const auto one = run(1);
    if (setting != 2) {
      EXPECT_EQ(std::get<1>(one)[0], 300);
      EXPECT_EQ(std::get<1>(one)[1], 2100);
      EXPECT_EQ(std::get<1>(one)[2], 4900);
    }
    EXPECT_EQ(std::get<2>(one), std::vector<int32_t>(rows, static_cast<int32_t>(m)));
    EXPECT_LT(std::get<0>(one)[0], 0.0f);
    EXPECT_GT(std::get<0>(one)[0], -3.0f);
    for (const int threads : {2, 3}) {
      SCOPED_TRACE(testing::Message() << threads << " threads");
      const auto several = run(threads);
      EXPECT_EQ(std::get<0>(several), std::get<0>(one));
      EXPECT_EQ(std::get<1>(several), std::get<1>(one));
      EXPECT_EQ(std::get<3>(several), std::get<3>(one));
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace tfm::internal
