#include "tfm/train/model_batch.h"

#include "tfm/data/vocab.h"

namespace tfm::internal {

nn::Batch model_batch(const data::TokenBatch& batch) {
  return nn::Batch::from_ids(Tensor::from_ints({batch.rows, batch.source_width}, batch.src),
                             Tensor::from_ints({batch.rows, batch.target_width}, batch.tgt_in),
                             Tensor::from_ints({batch.rows, batch.target_width}, batch.tgt_out),
                             data::kPadId);
}

}  // namespace tfm::internal
