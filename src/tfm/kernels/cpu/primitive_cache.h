// A least-recently-used cache of oneDNN primitives, shared by the matrix-product kernels.
//
// Every primitive holds its own JIT-compiled code: about 50 KB (f32) to 100 KB (bf16) of resident
// memory each. Products change shape with every batch (rows = sentences x beam while decoding,
// sentences x padded length in the encoder, and attention's lengths), so a cache that keeps every
// shape grows for a whole run, and a large bound is only reached after many minutes of serving.
// Creating a primitive takes 0.1 to 0.3 ms in f32 and about 1.2 ms for AMX's bf16 kernels, so
// one-matrix products keep their shapes few instead (matmul_cpu.cc cuts a changing row count or
// inner dimension into a multiple of 256 and a padded tail), and a small bound costs little: the
// entries a batch keeps using stay, the rest are made again when needed.
//
// These caches are the one bound on primitives: oneDNN's own primitive cache would keep another
// copy of each (1024 by default), so it is switched off unless the ONEDNN_PRIMITIVE_CACHE_CAPACITY
// environment variable sets it.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "tfm/kernels/cpu/isa.h"

namespace tfm::internal::cpu {
inline namespace TFM_CPU_ISA {

// Switches oneDNN's own primitive cache off (once, unless the environment sets its capacity).
void use_only_tfm_primitive_caches();

template <typename Key, typename Value, typename Hash>
class PrimitiveCache {
 public:
  explicit PrimitiveCache(size_t capacity) : capacity_(capacity) {
    use_only_tfm_primitive_caches();
  }

  // The value of `key`, made by `make()` when it is not cached; the least recently used entry goes
  // when the cache is full. `make` runs under the cache's lock, and may throw (nothing is cached).
  template <typename Make>
  Value get(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = index_.find(key);
    if (found != index_.end()) {
      entries_.splice(entries_.begin(), entries_, found->second);
      return found->second->second;
    }
    entries_.emplace_front(key, make());
    index_.emplace(key, entries_.begin());
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    return entries_.front().second;
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

  size_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<Key, Value>;
  const size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> entries_;
  std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
};

}  // namespace TFM_CPU_ISA
}  // namespace tfm::internal::cpu
