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

// Copies `parameters` into a new flat buffer on `device` (the parameters may be on any device).
FlatParameters flatten(const nn::NamedTensors& parameters, Device device = Device::cpu);

}  // namespace tfm::internal
