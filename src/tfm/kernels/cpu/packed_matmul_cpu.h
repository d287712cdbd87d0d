// Products with a weight packed once: y = x W^T for inference.
//
// oneDNN's matmul reads its weights in a blocked layout (for AVX-512, 16 x 64 tiles, bf16 pairs
// interleaved). Given a plain W it repacks W on every call: a pass over all of W that costs about
// as much as the product itself when x has few rows, as in a decoding step (32 to 128 rows against
// 512 x 2048 weights). PackedWeight does that once (converting to bf16 in the same pass when
// asked); ops::PackedWeight (ops/packed_weight.h) holds one, packed when an inference model is
// loaded, and ops::linear multiplies with it for products without a gradient.
#pragma once

#include <cstdint>
#include <memory>

#include "tfm/core/dtype.h"
#include "tfm/core/tensor.h"

namespace tfm::cpu {

class PackedWeight {
 public:
  // Packs w, f32 row-major [n, k] (n output features), into `dtype` (f32 or bf16; bf16 rounds to
  // nearest even, as f32_to_bf16).
  PackedWeight(const float* w, int64_t n, int64_t k, DType dtype);

  int64_t out_features() const { return n_; }
  int64_t in_features() const { return k_; }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return storage_.nbytes(); }

  struct Layout;  // oneDNN's memory descriptor of the packed weight
  const Layout& layout() const { return *layout_; }
  const void* data() const { return storage_.raw(); }

 private:
  int64_t n_ = 0, k_ = 0;
  DType dtype_ = DType::f32;
  std::shared_ptr<const Layout> layout_;
  Tensor storage_;
};

// y [m, n] (f32, row-major) = x [m, k] W^T (+ bias [n], f32); x row-major in w.dtype(). Runs on
// the calling thread alone inside an OpenMP parallel region (oneDNN's rule), else on all threads.
void packed_linear(const void* x, int64_t m, const PackedWeight& w, const float* bias, float* y);

}  // namespace tfm::cpu
