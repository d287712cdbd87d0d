#include "tfm/core/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace tfm::internal {

void use_default_openmp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kDefaultOpenMPSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: libgomp keeps its default then
}

}  // namespace tfm::internal
