// A bound on the host caching allocator while serving. Its free lists keep blocks by size class,
// and decoding batches of ever new shapes (sentences x beam x length) would leave each class at its
// own high-water mark: the cache would grow for as long as new shapes come (the 10-minute soak of
// docs/SERVING.md grew 12% from its first minute so). After each batch the bound becomes what the
// models hold plus twice the largest working set seen (in-use bytes above the models'), so the
// allocator keeps enough to serve the largest batch from its cache, and no more.
#pragma once

#include <cstddef>
#include <mutex>

#include "tfm/serve/batching_queue.h"

namespace tfm::internal::serve {

class HostCacheBound final : public QueueObserver {
 public:
  // Call once the models are loaded: what the host allocator holds in use then is theirs.
  // Every batch is passed on to `next` (may be null).
  explicit HostCacheBound(QueueObserver* next);

  void batch_decoded(int64_t sentences, int64_t padded_source_tokens, int64_t target_tokens,
                     double seconds) override;

  size_t limit() const;

 private:
  QueueObserver* next_;
  size_t models_bytes_;
  mutable std::mutex mutex_;
  size_t limit_ = 0;
};

}  // namespace tfm::internal::serve
