// Collectives across the processes of one training job (data-parallel training,
// docs/DISTRIBUTED.md). A Communicator is the job as this process sees it: its rank, the number of
// ranks, and the collectives that every rank calls in the same order. Implementations: one process
// (every collective is the identity), MPI (Open MPI, MPICH: mpirun, srun), and NCCL for the
// gradients of ranks that each have a GPU of their own (nccl_communicator.h), over one of the
// others. No sockets of our own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tfm::internal::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // For logs: e.g. "MPI (Open MPI v4.1.4), 2 ranks on 1 host".
  virtual std::string describe() const = 0;

  // Blocking collectives. Each returns when this rank's part is done; every rank must call the same
  // collectives in the same order with the same counts.
  //   all_reduce_sum: data[i] = sum over ranks of data[i], on every rank (in place).
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  // Every rank's value, in rank order (start-up checks: which rank differs).
  virtual std::vector<uint64_t> all_gather(uint64_t value) = 0;
  // root's bytes to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;

  // Asynchronous sum all-reduce of f32 buffers (gradient buckets). Reductions run in the order they
  // were started, the same order on every rank; a buffer must not be touched until wait_all()
  // returned. progress() lets the implementation move data while the caller computes (called
  // between the steps of the backward pass); it never blocks.
  //
  // The buffer is host memory, unless reduces_device_memory() says it is in the memory of this
  // rank's GPU: then the reduction is ordered with the GPU's queue (ops::device_queue), after
  // every kernel queued before start_all_reduce_sum, and the kernels queued after wait_all() come
  // after it; wait_all() need not wait on the host.
  virtual void start_all_reduce_sum(std::span<float> data) = 0;
  virtual void progress() = 0;
  virtual void wait_all() = 0;
  // Whether start_all_reduce_sum takes device pointers (NCCL) rather than host ones (the others:
  // a GPU's gradients are then copied through host memory, train/gradient_buckets.h).
  virtual bool reduces_device_memory() const { return false; }

  // Ends every rank of the job at once, with this exit code: a rank that fails must not leave the
  // others waiting in a collective. The caller has printed the reason.
  [[noreturn]] virtual void abort(int exit_code) = 0;
};

// The identity of one process alone.
std::unique_ptr<Communicator> make_single_process();

// This process's job, made on the first call and kept until exit: MPI when a launcher (mpirun,
// srun) started it as one of several ranks, else one process. Fails when launched as one of
// several ranks by a build without MPI (N copies writing one run directory would be wrong
// silently). Call it first from the main thread: MPI is initialised at MPI_THREAD_SERIALIZED.
Communicator& world();

// The rank and size a launcher gave this process through its environment (Open MPI, PMIx,
// MPICH's PMI, Slurm), without initialising MPI; {0, 1} when none did.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  std::string launcher;  // "" when none
};
LaunchInfo launch_info();

}  // namespace tfm::internal::dist
