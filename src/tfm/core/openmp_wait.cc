#include "tfm/core/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>

namespace tfm::internal {

void use_default_openmp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // Where the user binds threads to places, libgomp bound this (the initial) thread to the first
  // place when it was loaded, and a new start inherits that mask: the whole process, every OpenMP
  // thread included, would then run on that one place (a decode on 2 cores 3x slower).
  for (const char* binding : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY"})
    if (std::getenv(binding) != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kDefaultOpenMPSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: libgomp keeps its default then
}

}  // namespace tfm::internal
