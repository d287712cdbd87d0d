#include "tfm/serve/host_cache_bound.h"

#include <algorithm>

#include "tfm/core/allocator.h"

namespace tfm::internal::serve {

HostCacheBound::HostCacheBound(QueueObserver* next) : next_(next) {
  CachingAllocator& host = CachingAllocator::cpu();
  host.reset_peak();  // loading's peak (unpacked and packed weights at once) is not serving's
  models_bytes_ = host.stats().bytes_in_use;
}

void HostCacheBound::batch_decoded(int64_t sentences, int64_t padded_source_tokens,
                                   int64_t target_tokens, double seconds) {
  if (next_) next_->batch_decoded(sentences, padded_source_tokens, target_tokens, seconds);
  CachingAllocator& host = CachingAllocator::cpu();
  const AllocatorStats stats = host.stats();
  const size_t working = stats.peak_bytes_in_use - std::min(stats.peak_bytes_in_use, models_bytes_);
  const size_t bound = models_bytes_ + 2 * working;
  std::lock_guard lock(mutex_);
  if (bound <= limit_) return;  // the bound only rises, with the largest batch seen
  limit_ = bound;
  host.set_cache_limit(bound);
}

size_t HostCacheBound::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

}  // namespace tfm::internal::serve
