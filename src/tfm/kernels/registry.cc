// The registry of kernel tables: one slot per Device, filled once with the backends this build
// has. Adding a backend is one line here (its table) besides its folder and the build.
#include <array>

#include "tfm/kernels/cpu/isa_dispatch.h"
#include "tfm/kernels/kernel_table.h"

#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cuda/cuda_kernels.h"
#endif

namespace tfm::internal::kernels {

namespace {

constexpr size_t kDevices = 2;  // the values of Device

struct BackendInfo {
  std::string_view name;
  std::string_view not_built;  // why a build lacks it
};

constexpr std::array<BackendInfo, kDevices> kBackends = {{
    {"CPU", ""},
    {"CUDA",
     "tfm was built without CUDA (configure with the CUDA toolkit installed, TFM_ENABLE_CUDA=ON)"},
}};

std::array<const KernelTable*, kDevices>& tables() {
  static std::array<const KernelTable*, kDevices> registered = [] {
    std::array<const KernelTable*, kDevices> builtin{};
    builtin[static_cast<size_t>(Device::cpu)] = &cpu::dispatched_kernel_table();
#ifdef TFM_HAVE_CUDA
    builtin[static_cast<size_t>(Device::cuda)] = &cuda::kernel_table();
#endif
    return builtin;
  }();
  return registered;
}

}  // namespace

void register_kernels(Device device, const KernelTable* table) {
  tables()[static_cast<size_t>(device)] = table;
}

const KernelTable* registered_kernels(Device device) {
  return tables()[static_cast<size_t>(device)];
}

std::string_view backend_name(Device device) {
  return kBackends[static_cast<size_t>(device)].name;
}

std::string_view not_built_reason(Device device) {
  return kBackends[static_cast<size_t>(device)].not_built;
}

}  // namespace tfm::internal::kernels
