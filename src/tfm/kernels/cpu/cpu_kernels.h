// The CPU backend's kernel table (kernels/kernel_table.h) of this kernel set (kernels/cpu/isa.h),
// and what the set gives CPU dispatch (isa_dispatch.h), which registers the chosen one for
// Device::cpu.
#pragma once

#include "tfm/kernels/cpu/isa.h"
#include "tfm/kernels/cpu/isa_dispatch.h"
#include "tfm/kernels/kernel_table.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

const kernels::KernelTable& kernel_table();
const IsaKernels& isa_kernels();

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
