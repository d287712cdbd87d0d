#include "tfm/train/gradient_buckets.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "tfm/core/error.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {

namespace {
constexpr size_t kUnused = std::numeric_limits<size_t>::max();
}

GradientBuckets::GradientBuckets(const std::vector<Tensor>& parameters,
                                 dist::Communicator& communicator, int64_t bucket_bytes)
    : communicator_(communicator), parameters_(parameters) {
  TFM_CHECK(bucket_bytes > 0, "the all-reduce bucket size must be positive, got {}", bucket_bytes);
  const auto bucket_elements = std::max<int64_t>(1, bucket_bytes / 4);
  int64_t total = 0;
  for (const Tensor& p : parameters_) {
    TFM_CHECK(p.requires_grad() && p.dtype() == DType::f32,
              "gradient buckets need f32 parameters that require gradients, got {}", p.describe());
    total += p.numel();
  }
  flat_ = Tensor::zeros({std::max<int64_t>(total, 1)}, DType::f32,
                        parameters_.empty() ? Device::cpu : parameters_[0].device());
  gradients_.resize(parameters_.size());
  bucket_of_.resize(parameters_.size());
  int64_t offset = 0;
  // Reverse order: the last parameters of the forward pass complete first in the backward.
  for (size_t k = parameters_.size(); k-- > 0;) {
    const Tensor& p = parameters_[k];
    Tensor view = flat_.slice_rows(offset, offset + p.numel()).view(p.shape());
    AutogradMeta* meta = p.autograd_meta();
    meta->grad = view;
    meta->grad_valid = false;
    gradients_[k] = view;
    index_.emplace(meta, k);
    if (buckets_.empty() || buckets_.back().end - buckets_.back().begin >= bucket_elements)
      buckets_.push_back({offset, offset, {}, 0});
    buckets_.back().end = offset + p.numel();
    buckets_.back().parameters.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    offset += p.numel();
  }
  TFM_CHECK(!communicator_.reduces_device_memory() || flat_.device() != Device::cpu,
            "internal error: {} reduces device memory, and the gradients are in host memory",
            communicator_.describe());
  if (flat_.device() != Device::cpu && communicator_.size() > 1 &&
      !communicator_.reduces_device_memory())
    staging_ = Tensor::empty(flat_.shape(), DType::f32, Device::cpu);
  stats_.bytes = total * 4;
  stats_.buckets = static_cast<int64_t>(buckets_.size());
}

void GradientBuckets::watch(Tape& tape) {
  if (communicator_.size() == 1) return;
  watched_ = true;
  tape.set_observer(this);
  first_use_.assign(parameters_.size(), kUnused);
  completion_order_.clear();
  completed_ = 0;
  next_bucket_ = 0;
  for (Bucket& b : buckets_) b.waiting = b.parameters.size();
}

void GradientBuckets::on_use(const AutogradMeta* input, size_t entry) {
  auto it = index_.find(input);
  if (it != index_.end()) first_use_[it->second] = std::min(first_use_[it->second], entry);
}

void GradientBuckets::on_backward_done(size_t entry) {
  if (completion_order_.empty()) {
    // The forward is over: the order in which the backward completes the parameters.
    completion_order_.resize(parameters_.size());
    std::iota(completion_order_.begin(), completion_order_.end(), size_t{0});
    std::stable_sort(completion_order_.begin(), completion_order_.end(),
                     [&](size_t a, size_t b) { return first_use_[a] > first_use_[b]; });
  }
  // Every entry from the last down to `entry` has run: a parameter first used at or after it
  // gets no more gradient (unused ones, kUnused, complete at once).
  while (completed_ < completion_order_.size() &&
         first_use_[completion_order_[completed_]] >= entry) {
    --buckets_[bucket_of_[completion_order_[completed_]]].waiting;
    ++completed_;
  }
  start_ready_buckets();
  communicator_.progress();
}

void GradientBuckets::on_gradient_write(const AutogradMeta* tensor) {
  auto it = index_.find(tensor);
  if (it == index_.end()) return;
  TFM_CHECK(bucket_of_[it->second] >= next_bucket_,
            "internal error: a gradient was written after its bucket was all-reduced (parameter "
            "{} of {}, first used at tape entry {}): an op did not report this input through "
            "needs_grad()",
            it->second, parameters_.size(), first_use_[it->second]);
}

void GradientBuckets::start_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].waiting == 0)
    start(buckets_[next_bucket_++]);
}

void GradientBuckets::start(Bucket& bucket) {
  // A gradient that no batch of this rank wrote holds a stale value: it adds zero.
  std::vector<Tensor> unwritten;
  for (size_t k : bucket.parameters)
    if (!parameters_[k].autograd_meta()->grad_valid) unwritten.push_back(gradients_[k]);
  ops::fill_in_place(unwritten, 0.0f);
  // In place where the communicator reduces the memory flat_ is in: the host's, or a device's
  // (NCCL, which orders the sum after the kernels queued so far, this fill's among them).
  Tensor reduced = flat_.slice_rows(bucket.begin, bucket.end);
  if (staging_.defined()) {
    // A device's bucket is reduced in host memory. The copy to the host waits for every kernel
    // queued so far, so the values it takes are the final ones of this bucket.
    reduced = staging_.slice_rows(bucket.begin, bucket.end);
    reduced.copy_from(flat_.slice_rows(bucket.begin, bucket.end));
  }
  communicator_.start_all_reduce_sum(
      {reduced.device_data<float>(), static_cast<size_t>(reduced.numel())});
}

void GradientBuckets::finish() {
  if (communicator_.size() == 1) return;
  const auto wait_start = std::chrono::steady_clock::now();
  if (!watched_) next_bucket_ = 0;  // not watched: every bucket starts now
  watched_ = false;
  for (Bucket& b : buckets_) b.waiting = 0;
  start_ready_buckets();
  communicator_.wait_all();
  if (staging_.defined()) flat_.copy_from(staging_);  // the sums back to the device
  for (const Tensor& p : parameters_) p.autograd_meta()->grad_valid = true;
  stats_.exposed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
}

}  // namespace tfm::internal
