// The loading of cuBLASLt (cublaslt_library.h), as dist/nccl_communicator.cc loads NCCL.
#include "tfm/kernels/cuda/cublaslt_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <type_traits>

#include "tfm/core/error.h"

namespace tfm::internal::cuda {

namespace {

// The library's functions, or why they could not be had. Never unloaded: a handle and the plans of
// matmul_cuda.cc may be used until the process ends.
struct Loaded {
  CublasLt functions;
  std::string why_not;
};

void* open_library(const std::string& name, std::string* errors) {
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library != nullptr) return library;
  const char* error = dlerror();
  *errors += fmt::format("{}{}", errors->empty() ? "" : "; ",
                         error ? one_line(error) : name + ": unknown error");
#ifdef TFM_CUBLASLT_DIR
  // The toolkit the backend was built with, where the dynamic linker does not look by itself
  // (/usr/local/cuda/lib64 is in no default path).
  const std::string beside_toolkit = std::string(TFM_CUBLASLT_DIR) + "/" + name;
  library = dlopen(beside_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library != nullptr) return library;
  error = dlerror();
  *errors += "; " + (error ? one_line(error) : beside_toolkit + ": unknown error");
#endif
  return nullptr;
}

const Loaded& loaded() {
  static const Loaded result = [] {
    Loaded out;
    const std::string name = cublaslt_library_name();
    std::string errors;
    void* library = open_library(name, &errors);
    if (library == nullptr) {
      out.why_not =
          fmt::format("cannot load {} (the CUDA backend's products need it): {}", name, errors);
      return out;
    }
    std::string missing;
    const auto find = [&](auto& function, const char* symbol) {
      function =
          reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, symbol));
      if (function == nullptr) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", symbol);
    };
    CublasLt& f = out.functions;
    find(f.cublasLtCreate, "cublasLtCreate");
    find(f.cublasLtGetVersion, "cublasLtGetVersion");
    find(f.cublasLtGetStatusName, "cublasLtGetStatusName");
    find(f.cublasLtGetStatusString, "cublasLtGetStatusString");
    find(f.cublasLtMatmul, "cublasLtMatmul");
    find(f.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
    find(f.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
    find(f.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
    find(f.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    find(f.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    find(f.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    find(f.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    find(f.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    find(f.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    find(f.cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
    if (!missing.empty()) out.why_not = fmt::format("{} lacks {}", name, missing);
    return out;
  }();
  return result;
}

}  // namespace

std::string cublaslt_library_name() {
  return fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
}

const CublasLt& cublaslt() {
  const Loaded& library = loaded();
  if (!library.why_not.empty()) fail("cuda: {}", library.why_not);
  return library.functions;
}

std::string cublaslt_unavailable_reason() {
  return loaded().why_not;
}

}  // namespace tfm::internal::cuda
