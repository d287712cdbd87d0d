// The bridge from data/ to nn/: a batcher's host token ids become the model's i32 tensors. It sits
// in train/, above both, so that data/ and nn/ do not depend on each other.
#pragma once

#include "tfm/data/batcher.h"
#include "tfm/data/vocab.h"
#include "tfm/nn/batch.h"

namespace tfm::internal {

// nn::Batch::from_ids of the batch's three id matrices (pad = data::kPadId): checks that padding
// only ends rows and counts the tokens. `decoder_start` (ModelConfig::decoder_start()) is the first
// decoder input of every row, in place of the batcher's bos.
nn::Batch model_batch(const data::TokenBatch& batch, int32_t decoder_start = data::kBosId);

}  // namespace tfm::internal
