// The CUDA runtime as the rest of tfm sees it: whether a device can be used, making it ready
// (device memory for core/allocator.h, the stream, the cuBLASLt handle) and waiting for it. Plain
// C++ with no CUDA types, so that ops/ includes it in a g++ translation unit. Compiled only in a
// build with the CUDA backend (TFM_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <string>

namespace tfm::internal::cuda {

// Empty when a CUDA device can be used; else why not, in one line ("no CUDA driver", "no
// device", "cannot load libcublasLt.so.13 ...": cublaslt_library.h).
std::string unavailable_reason();

// Selects device 0, creates the stream every kernel runs on, and installs cudaMalloc/cudaFree
// behind the caching allocator of Device::cuda. Idempotent; after set_device_memory removed the
// functions, installs them again. Fails with a one-line error when no device can be used.
void initialize();
bool initialized();

// The stream every kernel and copy runs on (launch.cuh's stream()), as the cudaStream_t it is, for
// code without CUDA's types: the kernel table's `queue` (dist/nccl_communicator.h orders its
// reductions with it). Null before initialize().
void* queue();

// Waits until every kernel queued so far has finished; a kernel's failure surfaces here as a
// one-line error.
void synchronize();

// The device's free and total memory in bytes (cudaMemGetInfo), initialize() having run.
void memory_info(size_t* free_bytes, size_t* total_bytes);

// "NVIDIA H100 80GB HBM3, sm_90, 132 multiprocessors, 79.1 GiB, CUDA driver 13.0, cuBLASLt
// 13.1.0"
std::string describe();

// Whether device 0 has bf16 tensor cores (compute capability 8.0 and later); false without a
// usable device.
bool has_bf16_tensor_cores();

}  // namespace tfm::internal::cuda
