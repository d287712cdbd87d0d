// The CUDA backend's kernel table (kernels/kernel_table.h), registered for Device::cuda in a
// build with the CUDA backend.
#pragma once

#include "tfm/kernels/kernel_table.h"

namespace tfm::internal::cuda {

const kernels::KernelTable& kernel_table();

}  // namespace tfm::internal::cuda
