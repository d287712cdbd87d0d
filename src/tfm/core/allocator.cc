#include "tfm/core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <functional>
#include <new>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {
constexpr size_t kAlignment = 64;
// Host blocks at least this large are mapped on their own once a cache limit is set.
[[maybe_unused]] constexpr int kMappedBlockBytes = 1 << 20;
// Host blocks at least this large start on a huge-page boundary, and their whole huge pages are
// offered to the kernel's transparent huge pages. Streaming weights that do not fit in the caches
// (a decoding step reads all of a model's, 153 MB for `base` in f32) walks a page-table entry per
// 4 KiB page; in 2 MiB pages it walks 512x fewer, and such streams read faster (the measurements:
// docs/journal/2026-11-27-decode-weights-streamed.md). The hint changes no result, and is ignored
// where transparent huge pages are off; where they are `always`, the alignment alone does it.
constexpr size_t kHugePageBytes = size_t{2} << 20;

// The memory functions of Device::cuda; empty until a backend installs them.
DeviceMemory& cuda_memory() {
  static DeviceMemory memory;
  return memory;
}
}  // namespace

void set_device_memory(Device device, const DeviceMemory& memory) {
  TFM_CHECK(device != Device::cpu, "the host's memory functions cannot be replaced");
  CachingAllocator& allocator = CachingAllocator::for_device(device);
  TFM_CHECK(allocator.stats().bytes_in_use == 0,
            "cannot replace the memory functions of {} while {} bytes are in use",
            device_name(device), allocator.stats().bytes_in_use);
  if (cuda_memory().installed()) allocator.empty_cache();
  cuda_memory() = memory;
}

bool device_memory_installed(Device device) {
  return device == Device::cuda && cuda_memory().installed();
}

const DeviceMemory& device_memory(Device device) {
  TFM_CHECK(device == Device::cuda, "device {} has no memory functions", device_name(device));
  const DeviceMemory& memory = cuda_memory();
#ifdef TFM_HAVE_CUDA
  TFM_CHECK(memory.installed(),
            "cuda: the CUDA device is not initialised (ops::use_device(Device::cuda) does it)");
#else
  TFM_CHECK(memory.installed(),
            "tfm was built without CUDA; cuda tensors need a build with the CUDA toolkit");
#endif
  return memory;
}

CachingAllocator& CachingAllocator::cpu() {
  static CachingAllocator* allocator =
      new CachingAllocator(Device::cpu);  // never destroyed: tensors may outlive main
  return *allocator;
}

CachingAllocator& CachingAllocator::for_device(Device device) {
  if (device == Device::cpu) return cpu();
  static CachingAllocator* cuda = new CachingAllocator(Device::cuda);
  return *cuda;
}

void* CachingAllocator::system_allocate(size_t bytes) const {
  if (device_ != Device::cpu) return device_memory(device_).allocate(bytes);
  if (bytes < kHugePageBytes) return std::aligned_alloc(kAlignment, bytes);
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* ptr = std::aligned_alloc(kHugePageBytes, rounded);
#ifdef MADV_HUGEPAGE
  // Only the huge pages within `bytes`: a block's tail stays in small pages, so that a block of
  // 2.5 MiB does not make 4 MiB resident. A refusal (no THP in this kernel) leaves small pages.
  if (ptr != nullptr) madvise(ptr, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return ptr;
}

void CachingAllocator::system_release(void* ptr) const {
  if (device_ == Device::cpu) {
    std::free(ptr);
  } else {
    device_memory(device_).release(ptr);
  }
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
    trim_cache_locked(size);
  }
  void* ptr = system_allocate(size);
  if (ptr == nullptr) {
    empty_cache();
    ptr = system_allocate(size);
  }
  TFM_CHECK(ptr != nullptr, "out of {} memory allocating {} bytes", device_name(device_), size);
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
    for (void* ptr : blocks) system_release(ptr);
    stats_.bytes_cached -= size * blocks.size();
    blocks.clear();
  }
}

void CachingAllocator::set_cache_limit(size_t bytes) {
#ifdef __GLIBC__
  // Blocks returned to the host must leave the process. glibc serves a large request from its own
  // heap, not a mapping of its own, once a mapped block of that size has been freed (its mmap
  // threshold rises to the largest freed, up to 32 MiB), and memory freed inside its heap stays
  // resident: trimming the cache then grew the peak RSS of a Multi30k run by a third instead of
  // bounding it. A fixed threshold (which also stops the rise) maps every block of 1 MiB or more
  // on its own, and unmaps it when freed.
  if (device_ == Device::cpu && bytes > 0) mallopt(M_MMAP_THRESHOLD, kMappedBlockBytes);
#endif
  std::lock_guard<std::mutex> lock(mutex_);
  cache_limit_ = bytes;
  trim_cache_locked(0);
}

void CachingAllocator::trim_cache_locked(size_t incoming) {
  auto over = [&] { return stats_.bytes_in_use + stats_.bytes_cached + incoming > cache_limit_; };
  if (cache_limit_ == 0 || !over()) return;
  // The largest blocks first: the fewest calls to the system.
  std::vector<size_t> sizes;
  for (const auto& [size, blocks] : free_lists_)
    if (!blocks.empty()) sizes.push_back(size);
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  for (size_t size : sizes) {
    std::vector<void*>& blocks = free_lists_[size];
    while (!blocks.empty() && over()) {
      system_release(blocks.back());
      blocks.pop_back();
      stats_.bytes_cached -= size;
    }
    if (!over()) return;
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

}  // namespace tfm::internal
