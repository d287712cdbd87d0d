// The CPU backend's kernel table (kernels/kernel_table.h), registered for Device::cpu.
#pragma once

#include "tfm/kernels/kernel_table.h"

namespace tfm::internal::cpu {

const kernels::KernelTable& kernel_table();

}  // namespace tfm::internal::cpu
