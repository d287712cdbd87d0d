// Device dispatch (ops/dispatch.h), Tensor::to and the per-device allocator. No GPU is needed:
// a test installs host memory posing as cuda memory (set_device_memory), which gives real
// Device::cuda tensors that the ops must refuse (no CUDA kernel) or copy (Tensor::to).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "temp_dir.h"
#include "tfm/core/allocator.h"
#include "tfm/ops/device.h"
#include "tfm/ops/dispatch.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {
namespace {

using testing::error_of;

#ifdef TFM_HAVE_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

DeviceMemory fake_cuda_memory() {
  DeviceMemory memory;
  memory.allocate = [](size_t bytes) { return std::aligned_alloc(64, bytes); };
  memory.release = [](void* ptr) { std::free(ptr); };
  memory.copy = [](void* dst, bool, const void* src, bool, size_t bytes) {
    std::memcpy(dst, src, bytes);
  };
  return memory;
}

Tensor random_tensor(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (float& x : v) x = u(rng);
  return Tensor::from_floats(shape, v);
}

class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override { set_device_memory(Device::cuda, fake_cuda_memory()); }
  void TearDown() override { set_device_memory(Device::cuda, DeviceMemory{}); }
};

TEST(Dispatch, NoKernelMessages) {
  EXPECT_EQ(ops::detail::no_kernel_message("add", Device::cuda, false),
            "tfm was built without CUDA; add cannot run on cuda tensors");
  EXPECT_EQ(ops::detail::no_kernel_message("add", Device::cuda, true),
            "add: no CUDA kernel yet (its tensors are on cuda)");
}

TEST(Dispatch, CudaMemoryWithoutBackendIsAOneLineError) {
  if (ops::device_ready(Device::cuda))
    GTEST_SKIP() << "an earlier test of this process made the CUDA device ready";
  const std::string message = error_of([] { Tensor::empty({2, 3}, DType::f32, Device::cuda); });
  EXPECT_EQ(message.find('\n'), std::string::npos);
  if (kBuiltWithCuda) {
    EXPECT_NE(message.find("the CUDA device is not initialised"), std::string::npos) << message;
  } else {
    EXPECT_EQ(message.rfind("tfm was built without CUDA;", 0), 0u) << message;
  }
}

TEST_F(FakeCuda, ToRoundTripIsExact) {
  Tensor x = random_tensor({3, 5}, 1);
  EXPECT_TRUE(x.to(Device::cpu).same_storage(x));  // same device: the tensor itself
  Tensor on_cuda = x.to(Device::cuda);
  EXPECT_EQ(on_cuda.device(), Device::cuda);
  EXPECT_EQ(on_cuda.shape(), x.shape());
  EXPECT_TRUE(on_cuda.to(Device::cuda).same_storage(on_cuda));
  EXPECT_EQ(CachingAllocator::for_device(Device::cuda).device(), Device::cuda);
  EXPECT_GT(CachingAllocator::for_device(Device::cuda).stats().bytes_in_use, 0u);
  Tensor back = on_cuda.clone().to(Device::cpu);
  EXPECT_EQ(back.device(), Device::cpu);
  EXPECT_EQ(std::memcmp(back.data<float>(), x.data<float>(), x.nbytes()), 0);
  // i32 and bf16 elements too, and zeros made on the device.
  Tensor ids = Tensor::from_ints({4}, {3, -1, 7, 0});
  EXPECT_EQ(ids.to(Device::cuda).to(Device::cpu).to_ints(), ids.to_ints());
  EXPECT_EQ(Tensor::zeros({2, 2}, DType::bf16, Device::cuda).to(Device::cpu).to_floats(),
            std::vector<float>(4, 0.0f));
}

TEST_F(FakeCuda, HostAccessToDeviceTensorIsRefused) {
  Tensor on_cuda = random_tensor({2, 2}, 2).to(Device::cuda);
  const std::string message = error_of([&] { on_cuda.data<float>(); });
  EXPECT_NE(message.find("on cuda was read from host code"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { on_cuda.to_floats(); }), "");
  EXPECT_NE(on_cuda.device_data<float>(), nullptr);  // the kernels' access
}

TEST_F(FakeCuda, OpsOnCudaTensorsNameTheOp) {
  Tensor a = random_tensor({2, 4}, 3).to(Device::cuda);
  Tensor b = random_tensor({2, 4}, 4).to(Device::cuda);
  // An op with a CUDA kernel: without CUDA, the no-kernel message; in a CUDA build, the device is
  // not ready for these hand-made tensors. Once an earlier test of this process has made it ready
  // (a GPU machine), the op would run its kernel on host memory posing as device memory: not
  // called then.
  const auto expect_not_ready = [](const std::string& op, const auto& call) {
    if (!kBuiltWithCuda) {
      EXPECT_EQ(error_of(call), ops::detail::no_kernel_message(op, Device::cuda, false));
    } else if (!ops::device_ready(Device::cuda)) {
      EXPECT_EQ(error_of(call),
                op + ": the cuda device is not initialised (ops::use_device makes it ready)");
    }
  };
  expect_not_ready("add", [&] { ops::add(a, b); });
  expect_not_ready("relu", [&] { ops::relu(a); });
  expect_not_ready("softmax", [&] { ops::softmax(a); });
  expect_not_ready("log_softmax", [&] { ops::log_softmax(a); });
  expect_not_ready("top_k", [&] { ops::top_k(a, 2); });
  expect_not_ready("matmul", [&] { ops::matmul(a, b, false, true); });
  expect_not_ready("linear", [&] { ops::linear(a, b); });
  expect_not_ready("adam_step", [&] { ops::adam_step(a, b, a, b, {}); });
  expect_not_ready("global_norm", [&] { ops::global_norm({a}); });
  Tensor ids = Tensor::from_ints({2}, {0, 1}).to(Device::cuda);
  expect_not_ready("embedding", [&] { ops::embedding(ids, b, 1.0f); });
}

TEST_F(FakeCuda, MixedDevicesAreRefused) {
  Tensor a = random_tensor({2, 4}, 5);
  Tensor b = random_tensor({2, 4}, 6).to(Device::cuda);
  const std::string message = error_of([&] { ops::add(a, b); });
  EXPECT_EQ(message,
            "add: tensors on different devices (cpu and cuda); move them to one with Tensor::to");
  EXPECT_NE(error_of([&] { ops::linear(a, b); }).find("linear: tensors on different devices"),
            std::string::npos);
  Tensor gamma = Tensor::full({4}, 1.0f), beta = Tensor::zeros({4});
  EXPECT_NE(error_of([&] {
              ops::layer_norm(a, gamma, beta.to(Device::cuda), 1e-5f);
            }).find("layer_norm: tensors on different devices (cpu and cuda)"),
            std::string::npos);
  Tensor cache = Tensor::zeros({2, 3, 4}), values = random_tensor({2, 1, 4}, 7);
  EXPECT_NE(error_of([&] {
              ops::cache_write(cache, values.to(Device::cuda), 0);
            }).find("cache_write: tensors on different devices"),
            std::string::npos);
}

}  // namespace
}  // namespace tfm::internal
