#include "tfm/ops/packed_weight.h"

#include <string>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/dispatch.h"

namespace tfm::ops {

PackedWeight::PackedWeight(std::unique_ptr<const cpu::PackedWeight> cpu) : cpu_(std::move(cpu)) {}

PackedWeight::PackedWeight(Tensor device_weight) : device_weight_(std::move(device_weight)) {}

const cpu::PackedWeight& PackedWeight::cpu() const {
  TFM_CHECK(cpu_ != nullptr, "a weight packed on {} has no CPU form", device_name(device()));
  return *cpu_;
}

PackedWeight::~PackedWeight() = default;

int64_t PackedWeight::out_features() const {
  return cpu_ ? cpu_->out_features() : device_weight_.dim(0);
}

int64_t PackedWeight::in_features() const {
  return cpu_ ? cpu_->in_features() : device_weight_.dim(1);
}

DType PackedWeight::dtype() const {
  return cpu_ ? cpu_->dtype() : device_weight_.dtype();
}

size_t PackedWeight::bytes() const {
  return cpu_ ? cpu_->bytes() : device_weight_.nbytes();
}

std::shared_ptr<const PackedWeight> pack_weight(const Tensor& weight, DType product) {
  TFM_CHECK(weight.defined() && weight.dtype() == DType::f32 && weight.rank() == 2,
            "pack_weight: {} must be an f32 matrix",
            weight.defined() ? weight.describe() : std::string("an undefined tensor"));
  TFM_CHECK(product == DType::f32 || product == DType::bf16 || product == DType::i8,
            "pack_weight: products in {} are not supported (f32, bf16 or i8)", dtype_name(product));
  TFM_CHECK(product != DType::i8 || weight.device() == Device::cpu,
            "int8 products run on the CPU only (the model is on {}): use f32 or bf16",
            device_name(weight.device()));
  if (weight.device() != Device::cpu) {
    // A GPU multiplies the plain row-major weight: its packed form is a copy in the product type.
    return std::make_shared<const PackedWeight>(product == DType::bf16 ? to_bf16(weight)
                                                                       : weight.clone());
  }
  return std::make_shared<const PackedWeight>(std::make_unique<const cpu::PackedWeight>(
      weight.data<float>(), weight.dim(0), weight.dim(1), product));
}

}  // namespace tfm::ops
