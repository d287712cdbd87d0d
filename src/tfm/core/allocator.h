// A caching allocator per device: freed blocks go back to per-size-class free lists and are
// reused, so a training step in its steady state asks the system for no memory at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tfm/core/device.h"

namespace tfm::internal {

// How a device's memory is obtained, returned and copied. The host's is built in; a device backend
// (kernels/cuda: cudaMalloc, cudaFree, cudaMemcpy) installs its own with set_device_memory, so
// that core/ never includes a device runtime.
struct DeviceMemory {
  void* (*allocate)(size_t bytes) = nullptr;  // nullptr when out of memory
  void (*release)(void* ptr) = nullptr;
  // bytes from src to dst, where each side is host memory or this device's (`*_on_device`).
  void (*copy)(void* dst, bool dst_on_device, const void* src, bool src_on_device,
               size_t bytes) = nullptr;
  bool installed() const { return allocate != nullptr; }
};

// Installs (or, with DeviceMemory{}, removes) the memory functions of a non-host device. Blocks
// cached for that device are returned through the previous functions first; no tensor of the
// device may be alive. Tests install host memory posing as cuda to exercise Tensor::to.
void set_device_memory(Device device, const DeviceMemory& memory);
// The installed functions of a device; fails with a one-line error when there are none ("tfm was
// built without CUDA" in a build without the CUDA backend).
const DeviceMemory& device_memory(Device device);
// Whether a non-host device has memory functions installed.
bool device_memory_installed(Device device);

struct AllocatorStats {
  int64_t system_allocations = 0;  // blocks obtained from the system since start
  int64_t cache_hits = 0;          // allocations served from the cache
  size_t bytes_in_use = 0;         // handed out and not yet released
  size_t bytes_cached = 0;         // held in free lists
  size_t peak_bytes_in_use = 0;
};

class CachingAllocator {
 public:
  explicit CachingAllocator(Device device) : device_(device) {}

  // The allocator for host memory; 64-byte aligned blocks.
  static CachingAllocator& cpu();
  // The allocator of a device's memory: cpu(), or the device's (see set_device_memory).
  static CachingAllocator& for_device(Device device);
  Device device() const { return device_; }

  void* allocate(size_t bytes);
  void release(void* ptr, size_t bytes);
  // Returns every cached block to the system.
  void empty_cache();
  // A bound on the memory this allocator holds (in use + cached), 0 for none (the default): a
  // request the free lists cannot serve first returns cached blocks of other sizes to the system,
  // as many as it takes to stay under the bound. Free lists keep blocks by size class, so batches
  // of varying shapes would otherwise leave each class at its own high-water mark, and the cache
  // hold far more than any one step uses (a training run whose batch size comes from the memory
  // sets it: train/batch_size.h). Blocks in use are never touched; they may exceed the bound.
  void set_cache_limit(size_t bytes);
  AllocatorStats stats() const;
  void reset_peak();

  // Size classes: 2^k * {1, 1.25, 1.5, 1.75} above 4 KiB (waste below 25%), multiples of 64 B
  // below.
  static size_t size_class(size_t bytes);

  ~CachingAllocator();

 private:
  void* system_allocate(size_t bytes) const;
  void system_release(void* ptr) const;
  // With mutex_ held: returns cached blocks until `incoming` more bytes fit under the limit.
  void trim_cache_locked(size_t incoming);

  Device device_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_lists_;
  AllocatorStats stats_;
  size_t cache_limit_ = 0;
};

}  // namespace tfm::internal
