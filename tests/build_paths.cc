#include "build_paths.h"

const char* tfm_source_dir() {
  return TFM_SOURCE_DIR;
}

const char* tfm_binary_dir() {
  return TFM_BINARY_DIR;
}

const char* tfm_mpiexec() {
#ifdef TFM_MPIEXEC
  return TFM_MPIEXEC;
#else
  return "";
#endif
}
