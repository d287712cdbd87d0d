// What every CUDA kernel file includes: the stream, error checks after each call and launch, and
// grid sizes. Kernels run in the order they are queued on the one stream (stream()), so the
// caching allocator may hand a freed block to the next op without waiting.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tfm::internal::cuda {

// The stream every kernel and copy of tfm runs on (created by initialize()).
cudaStream_t stream();

// Throws tfm::Error "cuda: <what> failed at <file>:<line>: <cudaGetErrorString>" (runtime_cuda.cc).
[[noreturn]] void fail(int error, const char* what, const char* file, int line);

// Blocks for a grid-stride loop over n elements: enough to fill the device, never more than
// the elements need.
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  constexpr int64_t kMaxBlocks = 132 * 16;  // 16 blocks per multiprocessor of an H100
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace tfm::internal::cuda

#define TFM_CUDA_CHECK(call)                                                   \
  do {                                                                         \
    const cudaError_t tfm_cuda_error_ = (call);                                \
    if (tfm_cuda_error_ != cudaSuccess)                                        \
      ::tfm::internal::cuda::fail(tfm_cuda_error_, #call, __FILE__, __LINE__); \
  } while (false)

// After a kernel launch: a bad configuration (too many threads, too much shared memory) is
// reported here; faults inside the kernel surface at the next synchronisation.
#define TFM_CUDA_LAUNCHED(kernel) TFM_CUDA_CHECK(cudaPeekAtLastError())
