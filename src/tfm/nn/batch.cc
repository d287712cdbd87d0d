#include "tfm/nn/batch.h"

#include <cstring>

namespace tfm::internal::nn {

namespace {
// Number of tokens before the first pad; every token after it must be pad too.
int32_t row_length(const int32_t* row, int64_t width, int32_t pad_id, const char* what, int64_t b) {
  int64_t length = width;
  for (int64_t t = 0; t < width; ++t) {
    if (row[t] == pad_id) {
      length = t;
      break;
    }
  }
  for (int64_t t = length; t < width; ++t)
    TFM_CHECK(row[t] == pad_id, "{} row {} has a token after padding at position {}", what, b, t);
  return static_cast<int32_t>(length);
}
}  // namespace

Batch Batch::from_ids(Tensor src, Tensor tgt_in, Tensor tgt_out, int32_t pad_id) {
  TFM_CHECK(src.rank() == 2 && tgt_in.rank() == 2 && tgt_in.shape() == tgt_out.shape() &&
                src.dim(0) == tgt_in.dim(0),
            "batch shapes disagree: src {}, tgt_in {}, tgt_out {}", src.describe(),
            tgt_in.describe(), tgt_out.describe());
  Batch batch;
  int64_t rows = src.dim(0);
  for (int64_t b = 0; b < rows; ++b) {
    int32_t length =
        row_length(src.data<int32_t>() + b * src.dim(1), src.dim(1), pad_id, "source", b);
    TFM_CHECK(length > 0, "source row {} is empty", b);
    batch.src_lengths.push_back(length);
    batch.src_tokens += length;
    batch.tgt_tokens += row_length(tgt_out.data<int32_t>() + b * tgt_out.dim(1), tgt_out.dim(1),
                                   pad_id, "target", b);
  }
  batch.src = std::move(src);
  batch.tgt_in = std::move(tgt_in);
  batch.tgt_out = std::move(tgt_out);
  return batch;
}

Batch Batch::to(Device device) const {
  Batch moved = *this;
  moved.src = src.to(device);
  moved.tgt_in = tgt_in.to(device);
  moved.tgt_out = tgt_out.to(device);
  return moved;
}

namespace {
// [2B, W]: t's rows, then t's rows again, on t's device.
Tensor rows_twice(const Tensor& t) {
  const Tensor host = t.to(Device::cpu);
  Tensor doubled = Tensor::empty({2 * t.dim(0), t.dim(1)}, t.dtype());
  const size_t bytes = host.nbytes();
  std::memcpy(doubled.raw(), host.raw(), bytes);
  std::memcpy(static_cast<char*>(doubled.raw()) + bytes, host.raw(), bytes);
  return doubled.to(t.device());
}
}  // namespace

Batch Batch::twice() const {
  Batch doubled = *this;
  doubled.src = rows_twice(src);
  doubled.tgt_in = rows_twice(tgt_in);
  doubled.tgt_out = rows_twice(tgt_out);
  doubled.src_lengths.insert(doubled.src_lengths.end(), src_lengths.begin(), src_lengths.end());
  doubled.src_tokens = 2 * src_tokens;
  doubled.tgt_tokens = 2 * tgt_tokens;
  return doubled;
}

}  // namespace tfm::internal::nn
