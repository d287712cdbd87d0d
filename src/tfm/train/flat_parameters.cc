#include "tfm/train/flat_parameters.h"

#include <algorithm>
#include <vector>

namespace tfm::internal {

FlatParameters flatten(const nn::NamedTensors& parameters, Device device, FlatLayout layout) {
  int64_t total = 0;
  for (const auto& [name, tensor] : parameters) {
    TFM_CHECK(tensor.dtype() == DType::f32, "parameter '{}' is {}, expected f32", name,
              tensor.describe());
    total += tensor.numel();
  }
  // Each tensor's first element in the buffer.
  std::vector<int64_t> offsets(parameters.size());
  int64_t offset = 0;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const size_t k = layout == FlatLayout::in_order ? i : parameters.size() - 1 - i;
    offsets[k] = offset;
    offset += parameters[k].second.numel();
  }
  FlatParameters result{Tensor::empty({std::max<int64_t>(total, 1)}, DType::f32, device), {}};
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& [name, tensor] = parameters[i];
    Tensor view =
        result.flat.slice_rows(offsets[i], offsets[i] + tensor.numel()).view(tensor.shape());
    view.copy_from(tensor);
    result.views.emplace_back(name, view);
  }
  return result;
}

}  // namespace tfm::internal
