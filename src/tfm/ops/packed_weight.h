// A weight packed once for inference products: y = x W^T with W [out, in] stored in the layout the
// device's matrix product reads fastest, in the product type (f32, or bf16: f32 accumulation). An
// inference model packs every weight it multiplies with when it is loaded (decode::InferenceModel)
// and passes the handle to ops::linear (ops::ProductOptions::packed); training never packs (its
// weights change every step). Immutable after packing, so one handle serves every thread.
//
// The packed form belongs to the backend of the weight's device (KernelTable::pack_weight packs,
// KernelTable::packed_linear multiplies): ops sees only its shape, type and size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tfm/core/device.h"
#include "tfm/core/tensor.h"
#include "tfm/kernels/kernel_args.h"

namespace tfm::internal::ops {

class PackedWeight {
 public:
  PackedWeight(std::unique_ptr<const kernels::PackedForm> form, Device device);
  ~PackedWeight();
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;

  int64_t out_features() const { return form_->out_features(); }
  int64_t in_features() const { return form_->in_features(); }
  DType dtype() const { return form_->dtype(); }  // the product type it was packed in
  Device device() const { return device_; }
  size_t bytes() const { return form_->bytes(); }
  std::string describe() const { return form_->describe(); }
  // The backend's form, for its kernels (ops::linear, ops::output_log_softmax_top).
  const kernels::PackedForm& form() const { return *form_; }

 private:
  std::unique_ptr<const kernels::PackedForm> form_;
  Device device_;
};

// weight: f32 [out, in] (a matrix, or a block of rows of one); product: f32, bf16 (rounded to
// nearest even) or i8 (CPU only: rows quantised with a scale each, and the activations quantised
// per row at every product, kernels/cpu/quantize_cpu.h). The packed copy owns its memory: weight
// may change or go afterwards.
std::shared_ptr<const PackedWeight> pack_weight(const Tensor& weight, DType product);

}  // namespace tfm::internal::ops
