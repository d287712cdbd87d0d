// Word dropout (Sennrich and Zhang 2019, "Revisiting Low-Resource Neural Machine Translation";
// Marian's --dropout-src / --dropout-trg): in each training batch every source token, and with
// `targets` every decoder input token after the first, is replaced by <unk> with probability p, so
// that the model cannot lean on any one word being there. The decoder's outputs (what it learns to
// predict) and the padding are never touched; translation and validation see the text as it is.
//
// A token's draw is a pure function of (seed, epoch, batch, side, position in the batch): a resumed
// run, and every rank, replaces the same tokens.
#pragma once

#include <cstdint>

#include "tfm/data/batcher.h"

namespace tfm::internal::data {

struct WordDropout {
  double probability = 0.0;  // in [0, 1); 0: off
  bool targets = false;      // the decoder inputs too, else the sources only
};

// Replaces `batch`'s tokens as above; `where` is the batch's position in the batcher's order
// (Batcher::state() before the batch was taken). Returns the number of tokens replaced.
int64_t drop_words(TokenBatch& batch, const WordDropout& options, uint64_t seed,
                   const Batcher::State& where);

}  // namespace tfm::internal::data
