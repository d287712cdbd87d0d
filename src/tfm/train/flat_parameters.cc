#include "tfm/train/flat_parameters.h"

#include <algorithm>

namespace tfm::internal {

FlatParameters flatten(const nn::NamedTensors& parameters, Device device) {
  int64_t total = 0;
  for (const auto& [name, tensor] : parameters) {
    TFM_CHECK(tensor.dtype() == DType::f32, "parameter '{}' is {}, expected f32", name,
              tensor.describe());
    total += tensor.numel();
  }
  FlatParameters result{Tensor::empty({std::max<int64_t>(total, 1)}, DType::f32, device), {}};
  int64_t offset = 0;
  for (const auto& [name, tensor] : parameters) {
    Tensor view = result.flat.slice_rows(offset, offset + tensor.numel()).view(tensor.shape());
    view.copy_from(tensor);
    result.views.emplace_back(name, view);
    offset += tensor.numel();
  }
  return result;
}

}  // namespace tfm::internal
