#include "tfm/ops/packed_weight.h"

#include <string>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/ops/dispatch.h"

namespace tfm::internal::ops {

PackedWeight::PackedWeight(std::unique_ptr<const kernels::PackedForm> form, Device device)
    : form_(std::move(form)), device_(device) {}

PackedWeight::~PackedWeight() = default;

std::shared_ptr<const PackedWeight> pack_weight(const Tensor& weight, DType product) {
  TFM_CHECK(weight.defined() && weight.dtype() == DType::f32 && weight.rank() == 2,
            "pack_weight: {} must be an f32 matrix",
            weight.defined() ? weight.describe() : std::string("an undefined tensor"));
  TFM_CHECK(product == DType::f32 || product == DType::bf16 || product == DType::i8,
            "pack_weight: products in {} are not supported (f32, bf16 or i8)", dtype_name(product));
  TFM_CHECK(product != DType::i8 || weight.device() == Device::cpu,
            "int8 products run on the CPU only (the model is on {}): use f32 or bf16",
            device_name(weight.device()));
  const Device device = weight.device();
  return std::make_shared<const PackedWeight>(
      detail::kernel("pack_weight", device, &kernels::KernelTable::pack_weight)(weight, product),
      device);
}

}  // namespace tfm::internal::ops
