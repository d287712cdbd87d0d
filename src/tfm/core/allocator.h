// A caching allocator: freed blocks go back to per-size-class free lists and are reused, so a
// training step in its steady state asks the system for no memory at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tfm {

struct AllocatorStats {
  int64_t system_allocations = 0;  // blocks obtained from the system since start
  int64_t cache_hits = 0;          // allocations served from the cache
  size_t bytes_in_use = 0;         // handed out and not yet released
  size_t bytes_cached = 0;         // held in free lists
  size_t peak_bytes_in_use = 0;
};

class CachingAllocator {
 public:
  // The allocator for host memory; 64-byte aligned blocks.
  static CachingAllocator& cpu();

  void* allocate(size_t bytes);
  void release(void* ptr, size_t bytes);
  // Returns every cached block to the system.
  void empty_cache();
  AllocatorStats stats() const;
  void reset_peak();

  // Size classes: 2^k * {1, 1.25, 1.5, 1.75} above 4 KiB (waste below 25%), multiples of 64 B
  // below.
  static size_t size_class(size_t bytes);

  ~CachingAllocator();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_lists_;
  AllocatorStats stats_;
};

}  // namespace tfm
