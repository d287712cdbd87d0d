// A batch of sentence pairs as the model sees it: token ids, right-padded with pad_id.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/tensor.h"

namespace tfm::internal::nn {

struct Batch {
  Tensor src;      // i32 [B, S]
  Tensor tgt_in;   // i32 [B, T]: bos y1 .. yn, padded
  Tensor tgt_out;  // i32 [B, T]: y1 .. yn eos, padded
  std::vector<int32_t> src_lengths;
  int64_t src_tokens = 0;  // non-padding source tokens
  int64_t tgt_tokens = 0;  // non-padding target tokens (= rows the loss counts)

  // Checks shapes and that padding only appears at the end of each row; computes the lengths.
  static Batch from_ids(Tensor src, Tensor tgt_in, Tensor tgt_out, int32_t pad_id);
  int64_t size() const { return src.dim(0); }
  // The same batch with its id tensors on `device` (the lengths stay host bookkeeping).
  Batch to(Device device) const;
  // The batch's rows twice, [2B, ...]: rows B..2B-1 repeat rows 0..B-1 (R-Drop's two passes), on
  // the batch's device; the token counts double.
  Batch twice() const;
};

}  // namespace tfm::internal::nn
