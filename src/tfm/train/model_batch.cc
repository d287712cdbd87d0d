#include "tfm/train/model_batch.h"

#include "tfm/data/vocab.h"

namespace tfm::internal {

nn::Batch model_batch(const data::TokenBatch& batch, int32_t decoder_start) {
  std::vector<int32_t> tgt_in = batch.tgt_in;
  if (decoder_start != data::kBosId && batch.target_width > 0)
    for (int64_t r = 0; r < batch.rows; ++r)
      tgt_in[static_cast<size_t>(r * batch.target_width)] = decoder_start;
  return nn::Batch::from_ids(Tensor::from_ints({batch.rows, batch.source_width}, batch.src),
                             Tensor::from_ints({batch.rows, batch.target_width}, tgt_in),
                             Tensor::from_ints({batch.rows, batch.target_width}, batch.tgt_out),
                             data::kPadId);
}

}  // namespace tfm::internal
