// cuBLASLt loaded on demand (kernels/cuda/cublaslt_library.h): the tfm command starts without it,
// and the CUDA backend loads it when a product needs it, with or without a GPU (loading needs no
// device). Built only with the CUDA backend (TFM_HAVE_CUDA).
#ifdef TFM_HAVE_CUDA

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "build_paths.h"
#include "data_test_util.h"
#include "temp_dir.h"
#include "tfm/kernels/cuda/cublaslt_library.h"

namespace tfm::internal {
namespace {

using testing::quoted;
using testing::read_text;
using testing::TempDir;

// The dynamic linker lists every library it loads under LD_DEBUG=files ("file=libc.so.6 [0];
// needed by ..."): tfm --version must load the C library and not cuBLASLt.
TEST(CublasLtLibrary, TheCommandStartsWithoutIt) {
  TempDir dir;
  const auto log = dir / "loader";
  const std::string command = fmt::format("LD_DEBUG=files '{}/tfm' --version > /dev/null 2> {}",
                                          tfm_binary_dir(), quoted(log));
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << command;
  const std::string loaded = read_text(log);
  ASSERT_NE(loaded.find("file=libc.so.6"), std::string::npos) << "no loader log:\n" << loaded;
  EXPECT_EQ(loaded.find("libcublasLt"), std::string::npos) << loaded;
}

TEST(CublasLtLibrary, LoadsWhenAskedAndGivesItsVersion) {
  EXPECT_EQ(cuda::cublaslt_library_name(), fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR));
  ASSERT_EQ(cuda::cublaslt_unavailable_reason(), "");
  const cuda::CublasLt& lt = cuda::cublaslt();
  // cublasLtGetVersion: major * 10000 + minor * 100 + patch, of the library loaded.
  EXPECT_EQ(lt.cublasLtGetVersion() / 10000, static_cast<size_t>(CUBLAS_VER_MAJOR));
  EXPECT_STREQ(lt.cublasLtGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED),
               "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_NE(lt.cublasLtMatmul, nullptr);
}

}  // namespace
}  // namespace tfm::internal

#endif  // TFM_HAVE_CUDA
