#include "tfm/kernels/cuda/runtime_cuda.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "tfm/core/allocator.h"
#include "tfm/core/error.h"
#include "tfm/kernels/cuda/cublaslt_library.h"
#include "tfm/kernels/cuda/launch.cuh"

namespace tfm::internal::cuda {

namespace {

struct Runtime {
  bool ready = false;
  int device = 0;
  cudaStream_t stream = nullptr;
};

Runtime& runtime() {
  static Runtime r;
  return r;
}

std::mutex& init_mutex() {
  static std::mutex m;
  return m;
}

void* allocate(size_t bytes) {
  void* ptr = nullptr;
  // Out of memory is nullptr for the caching allocator, which names the size in its error.
  if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of the runtime
    return nullptr;
  }
  return ptr;
}

void release(void* ptr) {
  // A block may still be read by queued kernels: wait for them before the driver takes it back.
  cudaStreamSynchronize(runtime().stream);
  cudaFree(ptr);
}

// Copies in stream order. The host's memory is pageable (the caching allocator's): CUDA stages a
// host-to-device copy before the call returns, so the host may free its side at once and nothing
// needs to wait (a batch's ids or a mask's lengths cost no stall); a device-to-host copy waits
// for the stream, and so for every kernel queued before it, so that the host can read the result.
void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes) {
  const cudaMemcpyKind kind =
      dst_on_device ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                    : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  TFM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, runtime().stream));
  if (kind == cudaMemcpyDeviceToHost) TFM_CUDA_CHECK(cudaStreamSynchronize(runtime().stream));
}

// This process's GPU among the `count` visible: with several ranks of a job on one machine (Open
// MPI's mpirun, MPICH's Hydra, Slurm's srun say which of the machine's ranks this one is), rank r
// of the machine takes GPU r % count: one rank per GPU, or several sharing one when there are
// fewer GPUs than ranks. CUDA_VISIBLE_DEVICES narrows the choice as usual. cudaSetDevice holds for
// the calling thread only: a rank calls CUDA from its main thread (its reduction thread touches
// host memory only); other threads (tfm serve's) run where no launcher says a rank, on device 0.
int device_of_this_process(int count) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* value = std::getenv(name);
    const int local_rank = value != nullptr ? std::atoi(value) : -1;
    if (local_rank >= 0) return local_rank % count;
  }
  return 0;
}

}  // namespace

void fail(int error, const char* what, const char* file, int line) {
  const auto code = static_cast<cudaError_t>(error);
  throw Error(fmt::format("cuda: {} failed at {}:{}: {} ({})", what, file, line,
                          cudaGetErrorString(code), cudaGetErrorName(code)));
}

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no usable CUDA device: {} ({})", cudaGetErrorString(error),
                       cudaGetErrorName(error));
  }
  if (count == 0) return "no CUDA device is visible";
  // A device whose products cannot run is not usable either (the device `auto` then picks the
  // CPU). Asked only where a device is visible: loading the library costs a start 0.35 s.
  return cublaslt_unavailable_reason();
}

void initialize() {
  std::lock_guard<std::mutex> lock(init_mutex());
  Runtime& r = runtime();
  if (!r.ready) {
    const std::string why = unavailable_reason();
    TFM_CHECK(why.empty(), "cuda: {}", why);
    int count = 0;
    TFM_CUDA_CHECK(cudaGetDeviceCount(&count));
    r.device = device_of_this_process(count);
    TFM_CUDA_CHECK(cudaSetDevice(r.device));
    TFM_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    r.ready = true;
  }
  // Tests may have replaced the functions (core/allocator.h); install ours when they are gone.
  DeviceMemory memory;
  memory.allocate = allocate;
  memory.release = release;
  memory.copy = copy;
  if (!device_memory_installed(Device::cuda)) set_device_memory(Device::cuda, memory);
}

bool initialized() {
  // Ready, and the memory behind Device::cuda is the GPU's (a test may install host memory posing
  // as cuda memory; kernels must never see it).
  return runtime().ready && device_memory_installed(Device::cuda) &&
         device_memory(Device::cuda).allocate == allocate;
}

cudaStream_t stream() {
  return runtime().stream;
}

void* queue() {
  return static_cast<void*>(runtime().stream);
}

void synchronize() {
  if (runtime().ready) TFM_CUDA_CHECK(cudaStreamSynchronize(runtime().stream));
}

void memory_info(size_t* free_bytes, size_t* total_bytes) {
  TFM_CHECK(runtime().ready, "cuda: memory_info before initialize()");
  TFM_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

bool has_bf16_tensor_cores() {
  if (!unavailable_reason().empty()) return false;
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, runtime().device) == cudaSuccess && prop.major >= 8;
}

std::string describe() {
  cudaDeviceProp prop{};
  TFM_CUDA_CHECK(cudaGetDeviceProperties(&prop, runtime().device));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  const size_t lt = cublaslt().cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return fmt::format(
      "{}, sm_{}{}, {} multiprocessors, {:.1f} GiB, CUDA driver {}.{}, cuBLASLt {}.{}.{}",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount,
      static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024 * 1024), driver / 1000,
      (driver % 1000) / 10, lt / 10000, lt / 100 % 100, lt % 100);
}

}  // namespace tfm::internal::cuda
