#include "tfm/core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

#include "tfm/core/error.h"

namespace tfm {

namespace {
constexpr size_t kAlignment = 64;
}

CachingAllocator& CachingAllocator::cpu() {
  static CachingAllocator* allocator =
      new CachingAllocator();  // never destroyed: tensors may outlive main
  return *allocator;
}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  // Largest power of two <= bytes, then round up to the next quarter step above it.
  size_t base = std::bit_floor(bytes);
  size_t quarter = base / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_lists_.find(size);
    if (it != free_lists_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      stats_.cache_hits++;
      stats_.bytes_cached -= size;
      stats_.bytes_in_use += size;
      stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
      return ptr;
    }
  }
  void* ptr = std::aligned_alloc(kAlignment, size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = std::aligned_alloc(kAlignment, size);
  }
  TFM_CHECK(ptr != nullptr, "out of memory allocating {} bytes", size);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.system_allocations++;
  stats_.bytes_in_use += size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  size_t size = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  free_lists_[size].push_back(ptr);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_lists_) {
    for (void* ptr : blocks) std::free(ptr);
    stats_.bytes_cached -= size * blocks.size();
    blocks.clear();
  }
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

CachingAllocator::~CachingAllocator() {
  empty_cache();
}

}  // namespace tfm
