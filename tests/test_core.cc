#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "tfm/autograd/tape.h"
#include "tfm/core/allocator.h"
#include "tfm/core/tensor.h"

namespace tfm::internal {
namespace {

TEST(Shape, NumelRankAndNegativeIndex) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s[-1], 4);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  EXPECT_THROW(s[3], Error);
  EXPECT_EQ(Shape{}.numel(), 1);
}

TEST(Bf16, RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-3.5f)), -3.5f);
  // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Tensor, CreationViewsAndCopies) {
  Tensor t = Tensor::from_floats({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(t.describe(), "f32[2, 3]");
  Tensor rows = t.slice_rows(1, 2);
  EXPECT_EQ(rows.to_floats(), (std::vector<float>{4, 5, 6}));
  Tensor v = t.view({3, 2});
  EXPECT_TRUE(v.same_storage(t));
  Tensor c = t.clone();
  c.fill(7);
  EXPECT_EQ(t.to_floats()[0], 1.0f);
  EXPECT_THROW(t.view({4, 2}), Error);
  EXPECT_THROW(t.data<int32_t>(), Error);
  EXPECT_THROW(Tensor::from_floats({2, 2}, {1, 2, 3}), Error);
}

TEST(CachingAllocator, ReusesReleasedBlocks) {
  auto& alloc = CachingAllocator::cpu();
  { Tensor warm = Tensor::empty({1000, 37}); }
  int64_t before = alloc.stats().system_allocations;
  for (int i = 0; i < 10; ++i) {
    Tensor a = Tensor::empty({1000, 37});
    Tensor b = Tensor::empty({999, 37});  // same size class
  }
  // The first loop iteration may need one new block for b; after that, none.
  EXPECT_LE(alloc.stats().system_allocations - before, 1);
  EXPECT_EQ(CachingAllocator::size_class(4097), 5120u);
  EXPECT_EQ(CachingAllocator::size_class(1 << 20), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::size_class((1 << 20) + 1), (size_t{1} << 20) * 5 / 4);
}

// Host blocks of 2 MiB and more start on a huge-page boundary (the kernel may then back them with
// transparent huge pages), smaller ones on 64 bytes; every byte of each is usable.
TEST(CachingAllocator, LargeHostBlocksStartOnAHugePageBoundary) {
  CachingAllocator alloc(Device::cpu);
  const size_t huge_page = size_t{2} << 20;
  for (size_t bytes : {size_t{1000}, size_t{1} << 20, huge_page, 3 * huge_page + 4096}) {
    SCOPED_TRACE(bytes);
    void* block = alloc.allocate(bytes);
    const auto address = reinterpret_cast<uintptr_t>(block);
    EXPECT_EQ(address % (bytes >= huge_page ? huge_page : 64), 0u);
    std::memset(block, 0x5a, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(block)[bytes - 1], 0x5a);
    alloc.release(block, bytes);
  }
  alloc.empty_cache();
  EXPECT_EQ(alloc.stats().bytes_in_use, 0u);
}

TEST(Tape, GradTargetOverwritesThenAccumulates) {
  Tensor t = Tensor::zeros({3});
  t.set_requires_grad(true);
  GradTarget first = grad_target(t);
  EXPECT_FALSE(first.accumulate);
  GradTarget second = grad_target(t);
  EXPECT_TRUE(second.accumulate);
  t.zero_grad();
  EXPECT_FALSE(t.grad().defined());
  EXPECT_FALSE(grad_target(t).accumulate);
}

}  // namespace
}  // namespace tfm::internal

namespace tfm::internal {
namespace {

TEST(Error, MessagesAreOneLineWhateverTheQuotedTextHolds) {
  EXPECT_STREQ(Error("key 'max\ntokens' in\r\x1b[31m").what(), "key 'max\\ntokens' in\\r\\x1b[31m");
  EXPECT_STREQ(Error("tabs\tand UTF-8 \xc3\xa4 stay").what(), "tabs\tand UTF-8 \xc3\xa4 stay");
}

}  // namespace
}  // namespace tfm::internal

namespace tfm::internal {
namespace {

// With a limit, blocks cached in other size classes go back to the system before the allocator
// holds more than the limit; blocks in use are never touched.
TEST(CachingAllocator, ACacheLimitReturnsCachedBlocksOfOtherSizes) {
  CachingAllocator alloc(Device::cpu);
  constexpr size_t kMiB = size_t{1} << 20;
  // Without a limit every size stays cached.
  for (size_t mib : {1, 2, 4}) alloc.release(alloc.allocate(mib * kMiB), mib * kMiB);
  EXPECT_EQ(alloc.stats().bytes_cached, 7 * kMiB);
  // A limit below what is cached trims at once, the largest blocks first.
  alloc.set_cache_limit(5 * kMiB);
  EXPECT_EQ(alloc.stats().bytes_cached, 3 * kMiB);
  // A request the cache cannot serve makes room for itself: 3 + 3 > 5, so the 2 MiB block goes.
  void* held = alloc.allocate(3 * kMiB);
  EXPECT_EQ(alloc.stats().bytes_in_use, 3 * kMiB);
  EXPECT_EQ(alloc.stats().bytes_cached, kMiB);
  // A cached block of the size asked for is reused, whatever the limit.
  const int64_t system = alloc.stats().system_allocations;
  alloc.release(alloc.allocate(kMiB), kMiB);
  EXPECT_EQ(alloc.stats().system_allocations, system);
  // Blocks in use may exceed the limit; the cache is then emptied.
  void* big = alloc.allocate(4 * kMiB);
  EXPECT_EQ(alloc.stats().bytes_in_use, 7 * kMiB);
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
  alloc.release(big, 4 * kMiB);
  alloc.release(held, 3 * kMiB);
  EXPECT_EQ(alloc.stats().bytes_cached, 7 * kMiB);  // releasing keeps blocks, up to the next miss
  alloc.set_cache_limit(0);
  EXPECT_EQ(alloc.stats().bytes_cached, 7 * kMiB);
}

}  // namespace
}  // namespace tfm::internal
