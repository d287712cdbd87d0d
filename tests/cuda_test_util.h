// Helpers of the cross-device tests (tests/test_backend_ops.cc, tests/test_cuda_model.cc): every
// op on another device against the CPU on the same random inputs. Without a usable GPU (a build
// without CUDA, or a machine without one) each such test is skipped with a message that says why;
// GTest prints it and CTest counts it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/ops/device.h"

// Skips the test, saying why, unless a CUDA device can be used; else makes it ready.
#define TFM_REQUIRE_CUDA()                                                              \
  do {                                                                                  \
    const std::string tfm_why_ =                                                        \
        ::tfm::internal::ops::device_unavailable_reason(::tfm::internal::Device::cuda); \
    if (!tfm_why_.empty()) GTEST_SKIP() << "needs a CUDA GPU: " << tfm_why_;            \
    ::tfm::internal::ops::use_device(::tfm::internal::Device::cuda);                    \
  } while (false)

namespace tfm::internal::testing {

// Uniform values in [lo, hi) from a fixed seed, as an f32 CPU tensor.
inline Tensor uniform_tensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (float& x : v) x = dist(rng);
  return Tensor::from_floats(shape, v);
}

// ||actual - expected|| / ||expected|| (the norm over all elements, in double), after copying both
// to the host; NaN when any element of `actual` is not finite.
inline double relative_error(const Tensor& expected, const Tensor& actual) {
  const std::vector<float> e = expected.to(Device::cpu).to_floats();
  const std::vector<float> a = actual.to(Device::cpu).to_floats();
  EXPECT_EQ(e.size(), a.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < e.size() && i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::nan("");
    diff += (static_cast<double>(a[i]) - e[i]) * (static_cast<double>(a[i]) - e[i]);
    norm += static_cast<double>(e[i]) * e[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// Expects the result on `device` to match the CPU's within `tolerance` in relative norm, and the
// CPU result not to be all zeros (a test on zeros proves nothing).
inline void expect_matches_cpu(const Tensor& cpu, const Tensor& cuda, double tolerance,
                               const std::string& what, Device device = Device::cuda) {
  ASSERT_TRUE(cpu.defined() && cuda.defined()) << what;
  EXPECT_EQ(cpu.shape(), cuda.shape()) << what;
  EXPECT_EQ(cuda.device(), device) << what;
  double norm = 0;
  for (float x : cpu.to(Device::cpu).to_floats()) norm += static_cast<double>(x) * x;
  EXPECT_GT(norm, 0.0) << what << ": the CPU result is all zeros";
  const double error = relative_error(cpu, cuda);
  EXPECT_LE(error, tolerance) << what << ": relative error " << error;  // NaN fails too
}

}  // namespace tfm::internal::testing
