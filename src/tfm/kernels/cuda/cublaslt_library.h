// cuBLASLt, loaded with dlopen when the first CUDA product needs it, never linked: libcublasLt's
// initialisation at load costs every process that merely links it about 0.35 s and 205 MiB
// of memory (docs/journal/2026-12-04-cublaslt-on-demand.md), whether or not it ever uses a GPU.
// Compiled only in a build with the CUDA backend (TFM_HAVE_CUDA).
#pragma once

#include <cublasLt.h>

#include <string>

namespace tfm::internal::cuda {

// The functions of cuBLASLt that the CUDA backend calls, named as in cublasLt.h.
struct CublasLt {
  decltype(&::cublasLtCreate) cublasLtCreate = nullptr;
  decltype(&::cublasLtGetVersion) cublasLtGetVersion = nullptr;
  decltype(&::cublasLtGetStatusName) cublasLtGetStatusName = nullptr;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString = nullptr;
  decltype(&::cublasLtMatmul) cublasLtMatmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute = nullptr;
};

// "libcublasLt.so.13": the library of the major version that the build's headers declare.
std::string cublaslt_library_name();

// Loads the library once per process (the dynamic linker's search first, then the CUDA toolkit's
// library directory of the build) and returns its functions. Fails with a one-line error naming
// the library and why it could not be loaded, or which functions it lacks.
const CublasLt& cublaslt();

// Empty when cublaslt() can load the library; else the reason, as its error gives it.
std::string cublaslt_unavailable_reason();

}  // namespace tfm::internal::cuda
