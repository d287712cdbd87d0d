// A weight packed once for inference products: y = x W^T with W [out, in] stored in the layout the
// device's matrix product reads fastest, in the product type (f32, or bf16: f32 accumulation). An
// inference model packs every weight it multiplies with when it is loaded (decode::InferenceModel)
// and passes the handle to ops::linear (ops::ProductOptions::packed); training never packs (its
// weights change every step). Immutable after packing, so one handle serves every thread.
#pragma once

#include <cstdint>
#include <memory>

#include "tfm/core/device.h"
#include "tfm/core/tensor.h"

namespace tfm::cpu {
class PackedWeight;
}

namespace tfm::ops {

class PackedWeight {
 public:
  explicit PackedWeight(std::unique_ptr<const cpu::PackedWeight> cpu);
  // A GPU's form: the weight [out, in] in the product type, in the device's memory (cuBLASLt
  // reads it as it is).
  explicit PackedWeight(Tensor device_weight);
  ~PackedWeight();
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;

  int64_t out_features() const;
  int64_t in_features() const;
  DType dtype() const;  // the product type it was packed in
  Device device() const { return cpu_ ? Device::cpu : device_weight_.device(); }
  size_t bytes() const;
  // The CPU kernels' form (for ops, and the output layer's fused kernel call in decode/).
  const cpu::PackedWeight& cpu() const;
  // The GPU's form (device() != cpu).
  const Tensor& device_weight() const { return device_weight_; }

 private:
  std::unique_ptr<const cpu::PackedWeight> cpu_;
  Tensor device_weight_;
};

// weight: f32 [out, in] (a matrix, or a block of rows of one); product: f32, bf16 (rounded to
// nearest even) or i8 (CPU only: rows quantised with a scale each, and the activations quantised
// per row at every product, kernels/cpu/quantize_cpu.h). The packed copy owns its memory: weight
// may change or go afterwards.
std::shared_ptr<const PackedWeight> pack_weight(const Tensor& weight, DType product);

}  // namespace tfm::ops
