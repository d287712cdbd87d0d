// NCCL for the gradients of GPU ranks (dist/nccl_communicator.h): the agreement that refuses ranks
// sharing a GPU before NCCL's initialisation, and one rank's sum of device memory in the order of
// the GPU's queue. Built only with NCCL (TFM_HAVE_NCCL). Several GPUs cannot be had here: the
// 2-rank job on one GPU (tests/test_cli_train_distributed.cc) checks that NCCL is refused there.
#ifdef TFM_HAVE_NCCL

#include <gtest/gtest.h>

#include <vector>

#include "cuda_test_util.h"
#include "tfm/dist/nccl_communicator.h"
#include "tfm/ops/device.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

TEST(DistNccl, RefusesRanksThatShareAGpuOrCannotUseNccl) {
  EXPECT_EQ(dist::nccl_refusal({}), "");
  EXPECT_EQ(dist::nccl_refusal({17}), "");
  EXPECT_EQ(dist::nccl_refusal({17, 23, 42}), "");
  // Two ranks that report the same host and GPU.
  EXPECT_EQ(dist::nccl_refusal({17, 17}),
            "ranks 0 and 1 share a GPU of one host (NCCL needs a GPU of its own for each rank)");
  EXPECT_EQ(dist::nccl_refusal({17, 23, 42, 23}).rfind("ranks 1 and 3 share a GPU", 0), 0u);
  // A rank that cannot load libnccl.so.2 or identify its GPU: every rank refuses alike.
  EXPECT_EQ(dist::nccl_refusal({17, dist::kNoNccl}), "rank 1 cannot load libnccl.so.2");
  EXPECT_EQ(dist::nccl_refusal({dist::kNoGpu, 17}), "rank 0 cannot identify its GPU");
}

// Without a GPU queue (the device not ready) NCCL is refused with a reason, whether or not
// libnccl.so.2 is there.
TEST(DistNccl, RefusesWithoutAGpuQueue) {
  auto alone = dist::make_single_process();
  std::string why;
  EXPECT_EQ(dist::make_nccl(*alone, nullptr, &why), nullptr);
  EXPECT_TRUE(why.find("libnccl.so.2") != std::string::npos || why.find("GPU") != std::string::npos)
      << why;
}

// One rank: NCCL's sum is the identity, so a buffer written by an op queued just before
// start_all_reduce_sum and scaled by one queued just after wait_all holds that op's values scaled.
// Scaled by powers of two: exact. (In place with one rank NCCL may queue no kernel at all: the
// order of the streams shows only with several GPUs; this checks the calls, on the device's own
// buffer.)
TEST(CudaNccl, OneRankAllReducesDeviceMemoryInStreamOrder) {
  TFM_REQUIRE_CUDA();
  auto alone = dist::make_single_process();
  std::string why;
  auto nccl = dist::make_nccl(*alone, ops::device_queue(Device::cuda), &why);
  ASSERT_NE(nccl, nullptr) << "make_nccl refused on a machine with a GPU: " << why;
  EXPECT_NE(nccl->describe().find("NCCL"), std::string::npos) << nccl->describe();
  EXPECT_TRUE(nccl->reduces_device_memory());
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->size(), 1);

  constexpr int64_t n = 6000;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = (i % 2 ? -1.0f : 1.0f) * (0.25f + 0.001f * i);
  Tensor buffer = Tensor::from_floats({n}, values).to(Device::cuda);
  ops::synchronize(Device::cuda);
  for (int round = 0; round < 3; ++round) {
    ops::scale_in_place({buffer}, 4.0f);  // queued just before the sum
    nccl->start_all_reduce_sum({buffer.device_data<float>(), static_cast<size_t>(n)});
    nccl->progress();
    nccl->wait_all();
    ops::scale_in_place({buffer}, 0.5f);  // queued just after: 2x
  }
  const std::vector<float> result = buffer.to(Device::cpu).to_floats();
  ASSERT_EQ(result.size(), values.size());
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += result[i] != 8.0f * values[i];
  EXPECT_EQ(wrong, 0) << "e.g. element 1: " << result[1] << " instead of " << 8.0f * values[1];
}

}  // namespace
}  // namespace tfm::internal

#endif  // TFM_HAVE_NCCL
