// The cache of oneDNN primitives behind the CPU matrix products: least recently used first out, a
// failed make caches nothing, and oneDNN's own primitive cache is off (tfm's caches are the bound).
#include <gtest/gtest.h>

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>
#include <stdexcept>
#include <string>

#include "tfm/kernels/cpu/primitive_cache.h"

namespace tfm::internal::testing {
namespace {

using Cache = cpu::PrimitiveCache<int, std::string, std::hash<int>>;

TEST(PrimitiveCache, KeepsTheMostRecentlyUsedEntriesUpToItsCapacity) {
  Cache cache(2);
  int made = 0;
  auto make = [&](int key) {
    return [&made, key] {
      ++made;
      return std::to_string(key);
    };
  };
  EXPECT_EQ(cache.get(1, make(1)), "1");
  EXPECT_EQ(cache.get(2, make(2)), "2");
  EXPECT_EQ(cache.get(1, make(1)), "1");  // a hit: 1 is now the most recent
  EXPECT_EQ(made, 2);
  EXPECT_EQ(cache.get(3, make(3)), "3");  // full: 2, the least recently used, goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(made, 3);
  EXPECT_EQ(cache.get(1, make(1)), "1");
  EXPECT_EQ(made, 3);
  EXPECT_EQ(cache.get(2, make(2)), "2");  // made again
  EXPECT_EQ(made, 4);
  EXPECT_EQ(cache.size(), cache.capacity());
}

TEST(PrimitiveCache, AFailedMakeCachesNothing) {
  Cache cache(4);
  EXPECT_THROW(cache.get(7, []() -> std::string { throw std::runtime_error("no primitive"); }),
               std::runtime_error);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.get(7, [] { return std::string("seven"); }), "seven");
}

TEST(PrimitiveCache, OneDnnsOwnCacheIsOffUnlessTheEnvironmentSetsIt) {
  Cache cache(1);
  if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") == nullptr)
    EXPECT_EQ(dnnl::get_primitive_cache_capacity(), 0);
  else
    EXPECT_EQ(dnnl::get_primitive_cache_capacity(),
              std::atoi(std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY")));
}

}  // namespace
}  // namespace tfm::internal::testing
