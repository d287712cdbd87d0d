// The gradients of a model's parameters in one flat f32 buffer (as llm.c lays them out), cut into
// buckets that are summed across the ranks of a job as soon as the backward pass has completed
// them, while it computes the rest: the overlap of PyTorch's DistributedDataParallel and Marian.
//
// The buffer holds the parameters in reverse order, the order in which a backward pass finishes
// them, so that buckets complete one after the other. A bucket is complete when the backward has
// run every tape entry down to the first use of each of its parameters in the forward pass
// (autograd/tape.h, TapeObserver). Buckets start strictly in order, so every rank issues the same
// collectives in the same order whatever its timing.
//
// On a GPU the buckets are summed in device memory when the communicator reduces device memory
// (NCCL, dist/nccl_communicator.h: ranks that each have a GPU of their own), ordered with the
// backward's kernels by the communicator. Otherwise the sum goes through host memory: each bucket
// is copied to a host buffer of the same layout when it starts, reduced there by MPI, and the whole
// buffer copied back after the wait (docs/DISTRIBUTED.md, "GPU ranks").
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tfm/autograd/tape.h"
#include "tfm/core/tensor.h"
#include "tfm/dist/communicator.h"

namespace tfm::internal {

struct AllReduceStats {
  int64_t bytes = 0;    // per update
  int64_t buckets = 0;  // per update
  // The last update's wait after its backward, on the host (NCCL's sums are not waited for on the
  // host: then only the time to queue the last buckets).
  double exposed_seconds = 0.0;
};

class GradientBuckets final : public TapeObserver {
 public:
  // Gives each parameter a gradient buffer inside the flat one (views: the tape accumulates into
  // them directly). With one rank nothing is ever reduced.
  GradientBuckets(const std::vector<Tensor>& parameters, dist::Communicator& communicator,
                  int64_t bucket_bytes);
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Watches `tape` through the forward and backward of an update's last batch: buckets start as
  // its backward completes them. (The earlier batches of an update only accumulate.) The tape
  // forgets its observer at the end of that backward.
  void watch(Tape& tape);
  // After that backward: starts the buckets not started yet and waits for all. Every rank then
  // holds the sums; a gradient that no rank wrote is zero and counts as written.
  void finish();

  const Tensor& flat() const { return flat_; }
  const AllReduceStats& stats() const { return stats_; }

  void on_use(const AutogradMeta* input, size_t entry) override;
  void on_backward_done(size_t entry) override;
  void on_gradient_write(const AutogradMeta* tensor) override;

 private:
  struct Bucket {
    int64_t begin = 0, end = 0;  // elements of flat_
    std::vector<size_t> parameters;
    size_t waiting = 0;  // parameters not complete yet
  };
  void start_ready_buckets();
  void start(Bucket& bucket);

  dist::Communicator& communicator_;
  std::vector<Tensor> parameters_;
  std::vector<Tensor> gradients_;  // views of flat_
  std::unordered_map<const AutogradMeta*, size_t> index_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> buckets_;
  Tensor flat_;
  // The host copy of flat_ that MPI reduces when flat_ is in a device's memory, there are several
  // ranks and the communicator reduces host memory only (Open MPI's reductions read and write host
  // memory); undefined otherwise.
  Tensor staging_;

  // The update being watched.
  bool watched_ = false;
  std::vector<size_t> first_use_;         // tape entry, or SIZE_MAX when unused
  std::vector<size_t> completion_order_;  // parameters by first use, latest first
  size_t completed_ = 0;                  // of completion_order_
  size_t next_bucket_ = 0;
  AllReduceStats stats_;
};

}  // namespace tfm::internal
