// The NCCL communicator (nccl_communicator.h). NCCL's API comes from its header (the CUDA
// toolkit's); the library is loaded with dlopen, never linked: libnccl.so.2 is over 200 MB, and a
// binary must run, and a GPU bundle stay small, where nobody trains on several GPUs. A machine that
// does has it installed (with the driver's packages, or beside CUDA).
#include "tfm/dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "tfm/core/error.h"

namespace tfm::internal::dist {

namespace {

constexpr const char* kLibrary = "libnccl.so.2";

// NCCL's functions that tfm calls, from libnccl.so.2.
struct Nccl {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclGetErrorString) get_error_string = nullptr;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error = nullptr;
  int version = 0;  // NCCL_VERSION_CODE of the library loaded: 22809 for 2.28.9
};

// Loads libnccl.so.2 once per process; empty when loaded, else why not. Never unloaded: NCCL keeps
// threads of its own, and a communicator may live until exit.
std::string load(Nccl* nccl) {
  static Nccl loaded;
  static const std::string why_not = [] {
    void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* error = dlerror();
      return fmt::format("cannot load {}: {}", kLibrary, error ? one_line(error) : "unknown error");
    }
    std::string missing;
    const auto find = [&](auto& function, const char* name) {
      function =
          reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
      if (function == nullptr) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", name);
    };
    find(loaded.get_version, "ncclGetVersion");
    find(loaded.get_unique_id, "ncclGetUniqueId");
    find(loaded.comm_init_rank, "ncclCommInitRank");
    find(loaded.all_reduce, "ncclAllReduce");
    find(loaded.comm_destroy, "ncclCommDestroy");
    find(loaded.comm_abort, "ncclCommAbort");
    find(loaded.get_error_string, "ncclGetErrorString");
    find(loaded.comm_get_async_error, "ncclCommGetAsyncError");
    if (!missing.empty()) return fmt::format("{} lacks {}", kLibrary, missing);
    if (loaded.get_version(&loaded.version) != ncclSuccess)
      return fmt::format("{}: ncclGetVersion failed", kLibrary);
    return std::string();
  }();
  *nccl = loaded;
  return why_not;
}

// "2.28.9" (codes since 2.9 are major * 10000 + minor * 100 + patch).
std::string version_name(int code) {
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

// "<what>: <CUDA's message>", one line; empty on success.
std::string cuda_error(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return "";
  cudaGetLastError();  // clear the error, which is not sticky
  return fmt::format("{}: {} ({})", what, cudaGetErrorString(error), cudaGetErrorName(error));
}

void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) fail("nccl: {}", cuda_error(error, what));
}

// FNV-1a over the host's name and the GPU's UUID: equal keys are ranks of one host on one GPU.
// The UUID, not the device number, which CUDA_VISIBLE_DEVICES renumbers per process. Never kNoNccl
// or kNoGpu.
uint64_t gpu_key(std::string* why_not) {
  int device = 0;
  cudaDeviceProp properties{};
  std::string error = cuda_error(cudaGetDevice(&device), "cudaGetDevice");
  if (error.empty())
    error = cuda_error(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  if (!error.empty()) {
    *why_not = "cannot identify this rank's GPU: " + error;
    return kNoGpu;
  }
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  uint64_t hash = 14695981039346656037ull;
  const auto add = [&](const char* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i)
      hash = (hash ^ static_cast<unsigned char>(bytes[i])) * 1099511628211ull;
  };
  add(host.data(), std::strlen(host.data()) + 1);
  add(properties.uuid.bytes, sizeof properties.uuid.bytes);
  return hash <= kNoGpu ? hash + 2 : hash;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const Nccl& nccl, Communicator& host, cudaStream_t compute, ncclComm_t comm)
      : nccl_(nccl), host_(host), compute_(compute), comm_(comm) {
    // NCCL's stream does not wait for the legacy default stream (nor does tfm's), so that only
    // the events below order it.
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }

  ~NcclCommunicator() override {
    // The sums queued last are done before NCCL's resources go (errors here have nowhere to go).
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (comm_ != nullptr) nccl_.comm_destroy(comm_);
    if (done_ != nullptr) cudaEventDestroy(done_);
    if (ready_ != nullptr) cudaEventDestroy(ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  std::string describe() const override {
    return fmt::format("NCCL {} over {}", version_name(nccl_.version), host_.describe());
  }

  // Host values: the host's collectives.
  void all_reduce_sum(std::span<float> data) override { host_.all_reduce_sum(data); }
  void all_reduce_sum(std::span<double> data) override { host_.all_reduce_sum(data); }
  std::vector<uint64_t> all_gather(uint64_t value) override { return host_.all_gather(value); }
  void broadcast(void* data, size_t bytes, int root) override {
    host_.broadcast(data, bytes, root);
  }
  void barrier() override { host_.barrier(); }

  bool reduces_device_memory() const override { return true; }

  // The sum waits on the GPU, not on the host, for the kernels queued so far on the compute stream
  // (the backward that wrote this bucket): an event recorded there, which NCCL's stream waits for.
  // The backward goes on queueing kernels meanwhile, and NCCL's kernels run beside them.
  void start_all_reduce_sum(std::span<float> data) override {
    check_cuda(cudaEventRecord(ready_, compute_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    check(nccl_.all_reduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm_,
                           stream_),
          "ncclAllReduce");
  }

  void progress() override {}

  // The kernels queued next on the compute stream (the optimizer's) come after every sum: the
  // compute stream waits for an event recorded on NCCL's stream. The host waits for nothing.
  // Errors that NCCL found meanwhile (a rank gone, a network failure) are reported here.
  void wait_all() override {
    check_cuda(cudaEventRecord(done_, stream_), "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(compute_, done_, 0), "cudaStreamWaitEvent");
    ncclResult_t state = ncclSuccess;
    check(nccl_.comm_get_async_error(comm_, &state), "ncclCommGetAsyncError");
    if (state != ncclSuccess && state != ncclInProgress) check(state, "an all-reduce");
  }

  [[noreturn]] void abort(int exit_code) override {
    nccl_.comm_abort(comm_);  // NCCL's kernels must not wait for ranks that are gone
    comm_ = nullptr;
    host_.abort(exit_code);
    std::_Exit(exit_code);  // the host's abort does not return
  }

 private:
  void check(ncclResult_t result, const char* what) const {
    if (result != ncclSuccess)
      fail("NCCL {} failed on rank {}: {}", what, host_.rank(),
           one_line(nccl_.get_error_string(result)));
  }

  Nccl nccl_;
  Communicator& host_;
  cudaStream_t compute_ = nullptr;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;  // NCCL's kernels
  cudaEvent_t ready_ = nullptr;    // on compute_: a bucket's gradients are written
  cudaEvent_t done_ = nullptr;     // on stream_: the sums are written
};

// Rank 0's unique id, and whether it made one.
struct SharedId {
  int32_t ok = 0;
  ncclUniqueId id{};
};

}  // namespace

std::string nccl_refusal(const std::vector<uint64_t>& rank_keys) {
  for (size_t r = 0; r < rank_keys.size(); ++r) {
    if (rank_keys[r] == kNoNccl) return fmt::format("rank {} cannot load {}", r, kLibrary);
    if (rank_keys[r] == kNoGpu) return fmt::format("rank {} cannot identify its GPU", r);
  }
  for (size_t b = 1; b < rank_keys.size(); ++b)
    for (size_t a = 0; a < b; ++a)
      if (rank_keys[a] == rank_keys[b])
        return fmt::format(
            "ranks {} and {} share a GPU of one host (NCCL needs a GPU of its own for each rank)",
            a, b);
  return "";
}

std::unique_ptr<Communicator> make_nccl(Communicator& host, void* compute_stream,
                                        std::string* why_not) {
  // Every step that may fail on some ranks only ends in an agreement, so that every rank decides
  // alike: a rank that went on alone into ncclCommInitRank would wait there for the others
  // forever. In particular NCCL refuses two ranks on one GPU, but a rank learns it only inside
  // ncclCommInitRank, after the others have entered it.
  Nccl nccl;
  std::string own_reason = load(&nccl);
  uint64_t key = kNoNccl;
  if (own_reason.empty() && compute_stream == nullptr) {
    own_reason = "no GPU queue to order the sums with (the GPU is not ready)";
    key = kNoGpu;
  } else if (own_reason.empty()) {
    key = gpu_key(&own_reason);
  }
  const std::vector<uint64_t> keys = host.all_gather(key);
  std::string refusal = nccl_refusal(keys);
  if (!refusal.empty()) {
    *why_not = own_reason.empty() ? refusal : own_reason;
    return nullptr;
  }

  SharedId shared;
  if (host.rank() == 0) {
    const ncclResult_t made = nccl.get_unique_id(&shared.id);
    shared.ok = made == ncclSuccess;
    if (!shared.ok) own_reason = one_line(nccl.get_error_string(made));
  }
  host.broadcast(&shared, sizeof shared, 0);
  if (!shared.ok) {
    *why_not = "ncclGetUniqueId failed on rank 0" + (own_reason.empty() ? "" : ": " + own_reason);
    return nullptr;
  }

  ncclComm_t comm = nullptr;
  const ncclResult_t initialised = nccl.comm_init_rank(&comm, host.size(), shared.id, host.rank());
  const std::vector<uint64_t> ok = host.all_gather(initialised == ncclSuccess);
  for (size_t r = 0; r < ok.size(); ++r) {
    if (ok[r]) continue;
    if (comm != nullptr) nccl.comm_abort(comm);
    if (initialised == ncclSuccess) {
      *why_not = fmt::format("ncclCommInitRank failed on rank {}", r);
    } else {
      *why_not =
          fmt::format("ncclCommInitRank failed: {}", one_line(nccl.get_error_string(initialised)));
    }
    return nullptr;
  }
  return std::make_unique<NcclCommunicator>(nccl, host, static_cast<cudaStream_t>(compute_stream),
                                            comm);
}

}  // namespace tfm::internal::dist
