#include "tfm/data/word_dropout.h"

#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/splitmix64.h"
#include "tfm/data/vocab.h"

namespace tfm::internal::data {

namespace {

// Replaces the non-padding ids of `ids` from index `first` of each row of `width` with <unk>,
// each with probability p: a token is dropped when its 53-bit uniform draw is below p.
int64_t drop_side(std::vector<int32_t>& ids, int64_t width, int64_t first, double p, uint64_t key) {
  if (width == 0) return 0;
  const auto threshold = static_cast<uint64_t>(p * static_cast<double>(uint64_t{1} << 53));
  int64_t dropped = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (static_cast<int64_t>(i) % width < first || ids[i] == kPadId) continue;
    if ((splitmix64(key ^ splitmix64(static_cast<uint64_t>(i))) >> 11) < threshold) {
      ids[i] = kUnkId;
      ++dropped;
    }
  }
  return dropped;
}

}  // namespace

int64_t drop_words(TokenBatch& batch, const WordDropout& options, uint64_t seed,
                   const Batcher::State& where) {
  TFM_CHECK(options.probability >= 0 && options.probability < 1,
            "word dropout: the probability must be in [0, 1), got {}", options.probability);
  if (options.probability == 0) return 0;
  const uint64_t batch_key =
      splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(where.epoch)) ^
                 static_cast<uint64_t>(where.batch));
  int64_t dropped =
      drop_side(batch.src, batch.source_width, 0, options.probability, splitmix64(batch_key ^ 1));
  // tgt_in is bos (or the decoder's start) followed by the target's tokens: the start stays.
  if (options.targets)
    dropped += drop_side(batch.tgt_in, batch.target_width, 1, options.probability,
                         splitmix64(batch_key ^ 2));
  return dropped;
}

}  // namespace tfm::internal::data
