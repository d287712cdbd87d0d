#include "tfm/kernels/cpu/primitive_cache.h"

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

void use_only_tfm_primitive_caches() {
  static const bool done = [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") == nullptr)
      dnnl::set_primitive_cache_capacity(0);
    return true;
  }();
  (void)done;
}

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
