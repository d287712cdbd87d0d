// Word dropout (data/word_dropout.h): tokens replaced by <unk> at about the asked rate, never the
// padding, the decoder's first input or its outputs; the same tokens for the same batch position
// and seed, other tokens elsewhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/data/vocab.h"
#include "tfm/data/word_dropout.h"

namespace tfm::internal::testing {
namespace {

using data::Batcher;
using data::kBosId;
using data::kPadId;
using data::kUnkId;
using data::TokenBatch;
using data::WordDropout;

// rows x width ids from 10 on (never <unk>), the last `pad` columns of every odd row padding.
TokenBatch make_batch(int64_t rows, int64_t width, int64_t pad) {
  TokenBatch b;
  b.rows = rows;
  b.source_width = width;
  b.target_width = width;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < width; ++t) {
      const bool padded = r % 2 == 1 && t >= width - pad;
      const auto id = static_cast<int32_t>(10 + (r * width + t) % 500);
      b.src.push_back(padded ? kPadId : id);
      b.tgt_in.push_back(padded ? kPadId : (t == 0 ? kBosId : id));
      b.tgt_out.push_back(padded ? kPadId : id + 1);
    }
  }
  return b;
}

int64_t count(const std::vector<int32_t>& ids, int32_t id) {
  int64_t n = 0;
  for (int32_t x : ids) n += x == id;
  return n;
}

TEST(WordDropout, ReplacesSourceTokensAtTheRateAndNothingElse) {
  const TokenBatch before = make_batch(200, 50, 10);
  TokenBatch batch = before;
  const int64_t dropped = data::drop_words(batch, WordDropout{0.2, false}, 7, Batcher::State{3, 5});
  const int64_t tokens = static_cast<int64_t>(before.src.size()) - count(before.src, kPadId);
  EXPECT_EQ(dropped, count(batch.src, kUnkId));
  // 9000 draws at p = 0.2: the standard deviation is 38 tokens, so 1800 +- 200 is over 5 of them.
  EXPECT_NEAR(static_cast<double>(dropped), 0.2 * static_cast<double>(tokens), 200.0);
  for (size_t i = 0; i < batch.src.size(); ++i) {
    if (before.src[i] == kPadId) {
      EXPECT_EQ(batch.src[i], kPadId) << i;
    } else if (batch.src[i] != kUnkId) {
      EXPECT_EQ(batch.src[i], before.src[i]) << i;
    }
  }
  EXPECT_EQ(batch.tgt_in, before.tgt_in);  // "source": the decoder inputs as they were
  EXPECT_EQ(batch.tgt_out, before.tgt_out);
}

TEST(WordDropout, BothSidesKeepTheDecoderStartAndOutputs) {
  const TokenBatch before = make_batch(200, 50, 10);
  TokenBatch batch = before;
  const int64_t dropped = data::drop_words(batch, WordDropout{0.3, true}, 7, Batcher::State{0, 0});
  const int64_t source = count(batch.src, kUnkId), target = count(batch.tgt_in, kUnkId);
  EXPECT_EQ(dropped, source + target);
  // 8800 decoder inputs after the start tokens at p = 0.3: 2640 +- 43 (one standard deviation).
  EXPECT_NEAR(static_cast<double>(target), 2640.0, 250.0);
  for (int64_t r = 0; r < batch.rows; ++r)
    EXPECT_EQ(batch.tgt_in[static_cast<size_t>(r * batch.target_width)], kBosId) << r;
  for (size_t i = 0; i < batch.tgt_in.size(); ++i) {
    if (before.tgt_in[i] == kPadId) {
      EXPECT_EQ(batch.tgt_in[i], kPadId) << i;
    }
  }
  EXPECT_EQ(batch.tgt_out, before.tgt_out);
}

TEST(WordDropout, TheSameBatchPositionAndSeedGiveTheSameTokens) {
  const TokenBatch before = make_batch(40, 30, 5);
  auto dropped = [&](uint64_t seed, Batcher::State where) {
    TokenBatch b = before;
    data::drop_words(b, WordDropout{0.1, true}, seed, where);
    return b;
  };
  const TokenBatch a = dropped(1, {2, 9});
  const TokenBatch again = dropped(1, {2, 9});
  EXPECT_EQ(a.src, again.src);
  EXPECT_EQ(a.tgt_in, again.tgt_in);
  // Another batch, epoch or seed draws other tokens.
  EXPECT_NE(a.src, dropped(1, {2, 10}).src);
  EXPECT_NE(a.src, dropped(1, {3, 9}).src);
  EXPECT_NE(a.src, dropped(2, {2, 9}).src);
  // The two sides draw apart: a position is rarely dropped on both sides together.
  int64_t both = 0;
  for (size_t i = 0; i < a.src.size(); ++i)
    both += i % 30 != 0 && a.src[i] == kUnkId && a.tgt_in[i] == kUnkId;
  EXPECT_LT(both, 40);  // about 0.01 x 1090 = 11 expected, not the 109 of drawing alike
}

TEST(WordDropout, ZeroChangesNothingAndAProbabilityOfOneIsRefused) {
  const TokenBatch before = make_batch(10, 8, 2);
  TokenBatch batch = before;
  EXPECT_EQ(data::drop_words(batch, WordDropout{0.0, true}, 1, Batcher::State{}), 0);
  EXPECT_EQ(batch.src, before.src);
  EXPECT_EQ(batch.tgt_in, before.tgt_in);
  EXPECT_THROW(data::drop_words(batch, WordDropout{1.0, false}, 1, Batcher::State{}), Error);
}

}  // namespace
}  // namespace tfm::internal::testing
