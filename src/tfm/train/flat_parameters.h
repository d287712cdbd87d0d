// A model's parameters as views into one flat f32 buffer, in the canonical order: one broadcast at
// start-up, one checksum to compare across ranks (train/session.h).
#pragma once

#include "tfm/core/tensor.h"
#include "tfm/nn/layers.h"

namespace tfm::internal {

struct FlatParameters {
  Tensor flat;             // f32 [total]
  nn::NamedTensors views;  // each parameter's view of `flat`, in the order given
};

// Where flatten() puts the tensors in the buffer: in the order given, or from the last to the
// first, as the gradients' buffer holds them (train/gradient_buckets.h), so that parameters and
// gradients lie at the same offsets and the optimizer updates them all in one pass
// (Adam::use_flat). The views are in the order given either way.
enum class FlatLayout { in_order, reversed };

// Copies `parameters` into a new flat buffer on `device` (the parameters may be on any device).
FlatParameters flatten(const nn::NamedTensors& parameters, Device device = Device::cpu,
                       FlatLayout layout = FlatLayout::in_order);

}  // namespace tfm::internal
