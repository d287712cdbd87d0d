// NCCL for the gradients of ranks that each have a GPU of their own (docs/DISTRIBUTED.md, "GPU
// ranks"): a Communicator whose start_all_reduce_sum sums device memory with ncclAllReduce on a
// stream of its own, ordered with the GPU's kernels by events, while every host collective goes
// to another communicator (MPI), which also shares NCCL's unique id. Built only with the CUDA
// backend and NCCL's header (TFM_HAVE_NCCL); libnccl.so.2 itself is loaded when make_nccl runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tfm/dist/communicator.h"

namespace tfm::internal::dist {

// NCCL over `host` for the GPU that this thread's CUDA calls use (the rank's, selected before),
// its reductions ordered with `compute_stream` (a cudaStream_t: ops::device_queue). Collective:
// every rank of `host` calls it, and every rank returns a communicator or every rank returns
// nullptr, with the reason in one line in *why_not: libnccl.so.2 cannot be loaded on a rank, a
// rank cannot identify its GPU, two ranks of one host would share a GPU (which NCCL refuses), or
// NCCL's initialisation fails. `host` must outlive the result.
std::unique_ptr<Communicator> make_nccl(Communicator& host, void* compute_stream,
                                        std::string* why_not);

// The agreement make_nccl reaches before NCCL's initialisation, from every rank's key (rank
// order): a hash of (host name, GPU UUID), or kNoNccl / kNoGpu when the rank cannot load
// libnccl.so.2 / identify its GPU. "" when NCCL can be used; else why not, in one line ("ranks 0
// and 1 share a GPU of one host ...").
inline constexpr uint64_t kNoNccl = 0, kNoGpu = 1;
std::string nccl_refusal(const std::vector<uint64_t>& rank_keys);

}  // namespace tfm::internal::dist
