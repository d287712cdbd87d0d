#include "build_paths.h"

#include <cstdlib>

const char* tfm_source_dir() {
  return TFM_SOURCE_DIR;
}

const char* tfm_binary_dir() {
  return TFM_BINARY_DIR;
}

const char* tfm_mpiexec() {
#ifdef TFM_MPIEXEC
  const char* relocated = std::getenv("TFM_MPIEXEC");
  return relocated != nullptr && *relocated != '\0' ? relocated : TFM_MPIEXEC;
#else
  return "";
#endif
}
