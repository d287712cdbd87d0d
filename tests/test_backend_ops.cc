// Every op on every backend this build and machine have, against the CPU on the same random inputs
// (as ggml's test-backend-ops): forward results and every gradient (inputs and parameters),
// including the accumulating paths (a tensor used twice), and the kernels of the backend's table
// against the CPU's. The suite runs once per device: on the CPU it checks the CPU against itself on
// cloned inputs (the ops' paths, determinism, and the double references); on a device whose
// backend is not built in or has no usable hardware, every case is skipped with the reason.
//
// Tolerances are relative norms (cuda_test_util.h). f32: 1e-5 where the devices sum in another
// order; exact where both do the same arithmetic (dropout's mask and scale, embedding lookups,
// conversions, top-k, the cache's copies); global norms 1e-12 (both sum exact squares in double).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/core/tensor.h"
#include "tfm/kernels/cpu/convert_cpu.h"
#include "tfm/kernels/cpu/cross_entropy_cpu.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/optimizer_cpu.h"
#include "tfm/kernels/cpu/softmax_cpu.h"
#include "tfm/kernels/kernel_table.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal {
namespace {

using testing::uniform_tensor;

// The device the running case tests (its parameter), set by the fixture.
Device g_tested_device = Device::cpu;

Device tested_device() {
  return g_tested_device;
}

// The tested device's kernel table.
const kernels::KernelTable& backend() {
  return *kernels::registered_kernels(tested_device());
}

// A copy of x on the tested device that shares no memory with x (on the CPU: a clone), so that
// in-place ops on the copy leave the CPU's reference alone.
Tensor on_backend(const Tensor& x) {
  return tested_device() == Device::cpu ? x.clone() : x.to(tested_device());
}

// Expects the tested device's result to match the CPU's within `tolerance` in relative norm.
void expect_matches_cpu(const Tensor& cpu, const Tensor& other, double tolerance,
                        const std::string& what) {
  testing::expect_matches_cpu(cpu, other, tolerance, what, tested_device());
}

// Every device; a case on one that cannot be used is skipped, saying why.
class BackendTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    g_tested_device = GetParam();
    const std::string why = ops::device_unavailable_reason(GetParam());
    if (!why.empty())
      GTEST_SKIP() << "needs a " << kernels::backend_name(GetParam()) << " device: " << why;
    ops::use_device(GetParam());
  }
};

std::string device_label(const ::testing::TestParamInfo<Device>& info) {
  return std::string(device_name(info.param));
}

#define TFM_BACKEND_SUITE(name)                                                         \
  class name : public BackendTest {};                                                   \
  INSTANTIATE_TEST_SUITE_P(Devices, name, ::testing::Values(Device::cpu, Device::cuda), \
                           device_label)

TFM_BACKEND_SUITE(BackendOpsBasic);
TFM_BACKEND_SUITE(BackendOpsAttention);
TFM_BACKEND_SUITE(BackendOpsAttentionCached);
TFM_BACKEND_SUITE(BackendOpsCrossEntropy);
TFM_BACKEND_SUITE(BackendOpsTopK);
TFM_BACKEND_SUITE(BackendOpsCache);
TFM_BACKEND_SUITE(BackendMatmul);
TFM_BACKEND_SUITE(BackendLinear);
TFM_BACKEND_SUITE(BackendOutputCrossEntropy);

// ---- The element-wise, dropout, LayerNorm, softmax, embedding, optimizer and bf16 conversion
// ops: forward results and every gradient (inputs and parameters), including the accumulating
// paths (a tensor used twice).
//
// f32: 1e-5 where the devices sum in another order; exact where both do the same arithmetic
// (dropout's mask and scale, embedding lookups, conversions); global norms 1e-12 (both sum exact
// squares in double).
namespace basic {

constexpr double kF32 = 1e-5;

using Op = std::function<Tensor(const std::vector<Tensor>&)>;

struct Run {
  Tensor out;
  std::vector<Tensor> grads;  // one per input (undefined for inputs without a gradient)
};

// Copies `inputs` to `device` (the CPU copies are clones, so no two runs share a gradient), marks
// those with trainable[i] as requiring a gradient, runs `op` on a tape and back-propagates a fixed
// random seed of the output's shape.
Run run_on(Device device, const std::vector<Tensor>& inputs, const std::vector<bool>& trainable,
           const Op& op) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = device == Device::cpu ? inputs[i].clone() : inputs[i].to(device);
    if (trainable[i]) t.set_requires_grad(true);
    xs.push_back(t);
  }
  Run run;
  Tape tape;
  {
    TapeScope scope(tape);
    run.out = op(xs);
  }
  if (run.out.requires_grad()) tape.backward(run.out, uniform_tensor(run.out.shape(), 99));
  for (size_t i = 0; i < xs.size(); ++i)
    run.grads.push_back(trainable[i] ? xs[i].grad() : Tensor{});
  return run;
}

// Runs `op` on both devices and compares the output and every trainable input's gradient.
void expect_op_matches(const std::string& what, const std::vector<Tensor>& inputs,
                       const std::vector<bool>& trainable, const Op& op, double tolerance = kF32) {
  const Run cpu = run_on(Device::cpu, inputs, trainable, op);
  const Run gpu = run_on(tested_device(), inputs, trainable, op);
  expect_matches_cpu(cpu.out, gpu.out, tolerance, what + " forward");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!trainable[i]) continue;
    expect_matches_cpu(cpu.grads[i], gpu.grads[i], tolerance,
                       what + " gradient of input " + std::to_string(i));
  }
}

// The same bytes on both devices.
void expect_same_bits(const Tensor& cpu, const Tensor& cuda, const std::string& what) {
  ASSERT_EQ(cuda.device(), tested_device()) << what;
  const Tensor back = cuda.to(Device::cpu);
  ASSERT_EQ(cpu.dtype(), back.dtype()) << what;
  ASSERT_EQ(cpu.shape(), back.shape()) << what;
  EXPECT_EQ(std::memcmp(cpu.raw(), back.raw(), cpu.nbytes()), 0) << what;
}

TEST_P(BackendOpsBasic, AddReluReshape) {
  const Tensor a = uniform_tensor({37, 5}, 1), b = uniform_tensor({37, 5}, 2);
  expect_op_matches("add", {a, b}, {true, true}, [](auto& x) { return ops::add(x[0], x[1]); });
  // add(x, x): the second write of x's gradient accumulates.
  expect_op_matches("add(x, x)", {a}, {true}, [](auto& x) { return ops::add(x[0], x[0]); });
  expect_op_matches("relu", {a}, {true}, [](auto& x) { return ops::relu(x[0]); });
  // relu's backward adds to the gradient the add wrote first.
  expect_op_matches("add(relu(x), x)", {a}, {true},
                    [](auto& x) { return ops::add(ops::relu(x[0]), x[0]); });
  // gelu and swish over [-4, 4), their backwards accumulating after the add's write.
  const Tensor wide = uniform_tensor({37, 5}, 6, -4.0f, 4.0f);
  expect_op_matches("gelu", {wide}, {true}, [](auto& x) { return ops::gelu(x[0]); });
  expect_op_matches("swish", {wide}, {true}, [](auto& x) { return ops::swish(x[0]); });
  expect_op_matches("add(gelu(x), swish(x))", {wide}, {true},
                    [](auto& x) { return ops::add(ops::gelu(x[0]), ops::swish(x[0])); });
  expect_op_matches("reshape", {a, uniform_tensor({5, 37}, 3)}, {true, true}, [](auto& x) {
    return ops::add(ops::add(ops::reshape(x[0], {5, 37}), ops::reshape(ops::relu(x[0]), {5, 37})),
                    ops::reshape(x[1], {5, 37}));
  });
}

TEST_P(BackendOpsBasic, WriteGradAndSumRowsKernels) {
  for (bool accumulate : {false, true}) {
    const std::string how = accumulate ? " (accumulate)" : "";
    const Tensor src = uniform_tensor({37, 5}, 4);
    Tensor cpu_dst = uniform_tensor({37, 5}, 5);
    Tensor gpu_dst = on_backend(cpu_dst);
    const Tensor gpu_src = on_backend(src);
    cpu::write_grad(cpu_dst.data<float>(), src.data<float>(), src.numel(), accumulate, 0.375f);
    backend().write_grad(gpu_dst.device_data<float>(), gpu_src.device_data<float>(), src.numel(),
                         accumulate, 0.375f);
    expect_matches_cpu(cpu_dst, gpu_dst, kF32, "write_grad with scale" + how);

    // Bias gradients: column sums of [rows, cols], with rows over several of the kernel's passes
    // and a ragged last block of columns.
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 5}, {300, 517}, {0, 7}}) {
      const Tensor m = uniform_tensor({rows, cols}, 6);
      Tensor cpu_sum = uniform_tensor({cols}, 7);
      Tensor gpu_sum = on_backend(cpu_sum);
      const Tensor gpu_m = on_backend(m);
      cpu::sum_rows(m.data<float>(), rows, cols, cpu_sum.data<float>(), accumulate);
      const int64_t floats =
          backend().sum_rows_workspace ? backend().sum_rows_workspace(rows, cols) : 0;
      Tensor workspace = Tensor::empty({floats > 0 ? floats : 1}, DType::f32, tested_device());
      backend().sum_rows(gpu_m.device_data<float>(), rows, cols, gpu_sum.device_data<float>(),
                         accumulate, workspace.device_data<float>());
      if (rows == 0 && !accumulate) {
        EXPECT_EQ(gpu_sum.to(Device::cpu).to_floats(), std::vector<float>(cols, 0.0f));
      } else {
        expect_matches_cpu(cpu_sum, gpu_sum, kF32,
                           "sum_rows " + std::to_string(rows) + "x" + std::to_string(cols) + how);
      }
    }
  }
}

TEST_P(BackendOpsBasic, DropoutDropsTheCpuElements) {
  const Tensor x = uniform_tensor({37, 5, 11}, 8);
  for (float p : {0.1f, 0.5f}) {
    const std::string what = "dropout p=" + std::to_string(p);
    // Forward: the same mask and the same scaled values, bit for bit.
    const Tensor cpu_out = ops::dropout(x, p, 1234);
    const Tensor gpu_out = ops::dropout(on_backend(x), p, 1234);
    expect_same_bits(cpu_out, gpu_out, what);
    expect_op_matches(what, {x}, {true}, [p](auto& in) { return ops::dropout(in[0], p, 77); });
    // The backward adds into the gradient the add wrote first.
    expect_op_matches(what + " + x", {x}, {true},
                      [p](auto& in) { return ops::add(ops::dropout(in[0], p, 78), in[0]); });
  }
}

TEST_P(BackendOpsBasic, LayerNorm) {
  // d below a warp, d over several warps; rows over several of the backward's chunks of 64.
  for (const Shape& shape : {Shape{37, 5}, Shape{3, 70, 517}, Shape{37, 5, 24}}) {
    const int64_t d = shape[shape.rank() - 1];
    const std::vector<Tensor> inputs = {
        uniform_tensor(shape, 9), uniform_tensor({d}, 10, 0.5f, 1.5f), uniform_tensor({d}, 11)};
    const std::string what = "layer_norm " + shape.str();
    expect_op_matches(what, inputs, {true, true, true},
                      [](auto& in) { return ops::layer_norm(in[0], in[1], in[2], 1e-5f); });
    // Only the parameters, only x.
    expect_op_matches(what + " parameters only", inputs, {false, true, true},
                      [](auto& in) { return ops::layer_norm(in[0], in[1], in[2], 1e-5f); });
    expect_op_matches(what + " x only", inputs, {true, false, false},
                      [](auto& in) { return ops::layer_norm(in[0], in[1], in[2], 1e-5f); });
    // x, gamma and beta each used twice: every gradient accumulates on its second write.
    expect_op_matches(what + " twice", inputs, {true, true, true}, [](auto& in) {
      const Tensor inner = ops::layer_norm(in[0], in[1], in[2], 1e-5f);
      return ops::layer_norm(ops::add(inner, in[0]), in[1], in[2], 1e-5f);
    });
  }
}

TEST_P(BackendOpsBasic, AddDropoutLayerNorm) {
  for (const Shape& shape : {Shape{37, 5}, Shape{3, 70, 517}}) {
    const int64_t d = shape[shape.rank() - 1];
    const std::vector<Tensor> inputs = {uniform_tensor(shape, 12), uniform_tensor(shape, 13),
                                        uniform_tensor({d}, 14, 0.5f, 1.5f),
                                        uniform_tensor({d}, 15)};
    for (float p : {0.0f, 0.1f}) {
      const std::string what = "add_dropout_layer_norm " + shape.str() + " p=" + std::to_string(p);
      expect_op_matches(what, inputs, {true, true, true, true}, [p](auto& in) {
        return ops::add_dropout_layer_norm(in[0], in[1], p, 42, in[2], in[3], 1e-5f);
      });
      expect_op_matches(what + " branch only", inputs, {false, true, false, false}, [p](auto& in) {
        return ops::add_dropout_layer_norm(in[0], in[1], p, 43, in[2], in[3], 1e-5f);
      });
      // x as the residual and the branch: d(branch) adds to the d(x) written first; then the whole
      // again, so every gradient accumulates.
      expect_op_matches(what + " twice", inputs, {true, false, true, true}, [p](auto& in) {
        const Tensor inner = ops::add_dropout_layer_norm(in[0], in[0], p, 44, in[2], in[3], 1e-5f);
        return ops::add_dropout_layer_norm(inner, in[0], p, 45, in[2], in[3], 1e-5f);
      });
    }
  }
}

TEST_P(BackendOpsBasic, AddDropoutThenLayerNorm) {
  for (const Shape& shape : {Shape{37, 5}, Shape{3, 70, 517}}) {
    const int64_t d = shape[shape.rank() - 1];
    const std::vector<Tensor> inputs = {uniform_tensor(shape, 16), uniform_tensor(shape, 17),
                                        uniform_tensor({d}, 18, 0.5f, 1.5f),
                                        uniform_tensor({d}, 19)};
    for (float p : {0.0f, 0.1f}) {
      const std::string what =
          "add_dropout_then_layer_norm " + shape.str() + " p=" + std::to_string(p);
      // A stream of two steps whose sums go on: the second's sum is used besides its norm, and
      // the first's sum is the second's x, so the residual gradient reaches both backwards.
      expect_op_matches(what, inputs, {true, true, true, true}, [p](auto& in) {
        const ops::SumAndNorm first =
            ops::add_dropout_then_layer_norm(in[0], in[1], p, 46, in[2], in[3], 1e-5f);
        const ops::SumAndNorm second =
            ops::add_dropout_then_layer_norm(first.sum, first.normed, p, 47, in[2], in[3], 1e-5f);
        return ops::add(second.sum, second.normed);
      });
    }
  }
}

TEST_P(BackendOpsBasic, Softmax) {
  // Short rows, a vocabulary-sized row, and a row with -inf entries (masked positions).
  Tensor masked = uniform_tensor({4, 37}, 16, -5.0f, 5.0f);
  for (int64_t j = 0; j < 37; j += 3) masked.data<float>()[37 + j] = -INFINITY;
  for (const Tensor& x : {uniform_tensor({37, 5}, 17, -5.0f, 5.0f), masked}) {
    const std::string what = "softmax " + x.shape().str();
    expect_op_matches(what, {x}, {true}, [](auto& in) { return ops::softmax(in[0]); });
    // x used twice: the second backward adds (not add(softmax(x), x): -inf + 0 is not finite).
    expect_op_matches(what + " twice", {x}, {true}, [](auto& in) {
      return ops::add(ops::softmax(in[0]), ops::softmax(ops::relu(in[0])));
    });
  }
}

// softmax over a vocabulary-sized row and its gradient for an upstream g, in double:
// y = e^(x - max) / sum, dx = y (g - sum_i g_i y_i).
std::pair<std::vector<double>, std::vector<double>> softmax_reference(const std::vector<float>& x,
                                                                      const std::vector<float>& g,
                                                                      int64_t rows, int64_t n) {
  std::vector<double> y(x.size()), dx(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    double max = *std::max_element(xr, xr + n), sum = 0, dot = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(xr[j] - max);
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = std::exp(xr[j] - max) / sum;
    for (int64_t j = 0; j < n; ++j) dot += g[r * n + j] * y[r * n + j];
    for (int64_t j = 0; j < n; ++j) dx[r * n + j] = y[r * n + j] * (g[r * n + j] - dot);
  }
  return {y, dx};
}

double relative_to(const std::vector<double>& expected, const Tensor& actual) {
  const std::vector<float> a = actual.to(Device::cpu).to_floats();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff += (a[i] - expected[i]) * (a[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  return std::sqrt(diff / norm);
}

// A vocabulary-sized row against a double reference, on both devices: a sum of 37000 terms in
// f32 carries rounding that depends on the order of the additions, so the two devices' results
// differ by more than either differs from the exact values.
TEST_P(BackendOpsBasic, SoftmaxOfAVocabularySizedRowAgainstDouble) {
  const int64_t rows = 3, n = 37000;
  const Tensor x = uniform_tensor({rows, n}, 18, -8.0f, 8.0f), g = uniform_tensor({rows, n}, 21);
  const auto [y_ref, dx_ref] = softmax_reference(x.to_floats(), g.to_floats(), rows, n);
  for (Device device : {Device::cpu, tested_device()}) {
    Tensor xd = x.to(device).clone();
    xd.set_requires_grad(true);
    Tape tape;
    Tensor y;
    {
      TapeScope scope(tape);
      y = ops::softmax(xd);
    }
    tape.backward(y, g.to(device));
    const double y_error = relative_to(y_ref, y), dx_error = relative_to(dx_ref, xd.grad());
    std::printf("softmax [3, 37000] on %s: relative error %.3g, of its gradient %.3g\n",
                std::string(device_name(device)).c_str(), y_error, dx_error);
    if (device != Device::cpu) {
      EXPECT_LE(y_error, kF32);
      EXPECT_LE(dx_error, kF32);
    } else {
      // The CPU adds the row's terms in f32 in row order (3.6e-5 here): a bound that still fails
      // on a wrong softmax or gradient.
      EXPECT_LE(y_error, 1e-4);
      EXPECT_LE(dx_error, 1e-4);
    }
  }
}

TEST_P(BackendOpsBasic, LogSoftmaxKernel) {
  for (const Shape& shape : {Shape{37, 5}, Shape{4, 37000}}) {
    const Tensor x = uniform_tensor(shape, 19, -8.0f, 8.0f);
    const int64_t rows = shape[0], n = shape[1];
    Tensor cpu_y = Tensor::empty(shape);
    cpu::log_softmax(x.data<float>(), cpu_y.data<float>(), rows, n);
    Tensor gpu_y = Tensor::empty(shape, DType::f32, tested_device());
    const Tensor gpu_x = on_backend(x);
    backend().log_softmax(gpu_x.device_data<float>(), gpu_y.device_data<float>(), rows, n);
    expect_matches_cpu(cpu_y, gpu_y, kF32, "log_softmax " + shape.str());
    // In place (y = x).
    Tensor in_place = on_backend(x);
    backend().log_softmax(in_place.device_data<float>(), in_place.device_data<float>(), rows, n);
    expect_matches_cpu(cpu_y, in_place, kF32, "log_softmax in place " + shape.str());
  }
}

TEST_P(BackendOpsBasic, Embedding) {
  // 11 rows for 185 ids: every row is hit several times and the gradients sum.
  std::vector<int32_t> id_values(37 * 5), other_values(37 * 5);
  for (size_t i = 0; i < id_values.size(); ++i) {
    id_values[i] = static_cast<int32_t>((i * 7 + 3) % 11);
    other_values[i] = static_cast<int32_t>((i * 5 + 1) % 9);
  }
  const Tensor ids = Tensor::from_ints({37, 5}, id_values);
  const Tensor other = Tensor::from_ints({37, 5}, other_values);
  const Tensor table = uniform_tensor({11, 24}, 20);
  const Tensor cpu_out = ops::embedding(ids, table, 2.5f);
  const Tensor gpu_out = ops::embedding(on_backend(ids), on_backend(table), 2.5f);
  expect_same_bits(cpu_out, gpu_out, "embedding forward");
  expect_op_matches("embedding", {ids, table}, {false, true},
                    [](auto& in) { return ops::embedding(in[0], in[1], 2.5f); });
  // A vocabulary-sized table (ids of 16 bits and more), ids hit once or many times.
  std::vector<int32_t> wide_values(37 * 5);
  for (size_t i = 0; i < wide_values.size(); ++i)
    wide_values[i] = i % 4 == 0 ? 36999 : static_cast<int32_t>((i * 7919 + 11) % 37000);
  expect_op_matches("embedding vocabulary 37000",
                    {Tensor::from_ints({37, 5}, wide_values), uniform_tensor({37000, 40}, 21)},
                    {false, true}, [](auto& in) { return ops::embedding(in[0], in[1], 1.0f); });
  // The table used twice: the second backward adds.
  expect_op_matches("embedding twice", {ids, other, table}, {false, false, true}, [](auto& in) {
    return ops::add(ops::embedding(in[0], in[2], 2.5f), ops::embedding(in[1], in[2], 0.5f));
  });
}

TEST_P(BackendOpsBasic, EmbeddingOutOfRangeIdGivesNaN) {
  if (backend().host_memory) GTEST_SKIP() << "ids in host memory are checked on the host";
  // CUDA ids are not checked on the host (ops/embedding.cc): the row of a bad id is NaN, and
  // nothing is read out of bounds.
  // The backward leaves the table's gradient alone for them and sums the others.
  const Tensor ids = Tensor::from_ints({4}, {1, 11, -1, 1}).to(tested_device());
  Tensor table = uniform_tensor({11, 4}, 21).to(tested_device());
  table.set_requires_grad(true);
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    out = ops::embedding(ids, table, 1.0f);
  }
  const std::vector<float> values = out.to(Device::cpu).to_floats();
  for (int j = 0; j < 4; ++j) {
    EXPECT_TRUE(std::isfinite(values[j])) << j;
    EXPECT_TRUE(std::isnan(values[4 + j])) << j;
    EXPECT_TRUE(std::isnan(values[8 + j])) << j;
  }
  tape.backward(out, Tensor::full({4, 4}, 1.0f));
  const std::vector<float> grad = table.grad().to(Device::cpu).to_floats();
  for (int64_t i = 0; i < 11 * 4; ++i) EXPECT_EQ(grad[i], i / 4 == 1 ? 2.0f : 0.0f) << i;
}

TEST_P(BackendOpsBasic, AddPositions) {
  const std::vector<Tensor> inputs = {uniform_tensor({3, 37, 24}, 22),
                                      uniform_tensor({50, 24}, 23)};
  expect_op_matches("add_positions", inputs, {true, true},
                    [](auto& in) { return ops::add_positions(in[0], in[1], 5); });
  expect_op_matches("add_positions table only", inputs, {false, true},
                    [](auto& in) { return ops::add_positions(in[0], in[1], 13); });
  // x and the table used twice (different offsets): both gradients accumulate.
  expect_op_matches("add_positions twice", inputs, {true, true}, [](auto& in) {
    return ops::add(ops::add_positions(in[0], in[1], 5), ops::add_positions(in[0], in[1], 2));
  });
}

TEST_P(BackendOpsBasic, AdamStep) {
  const Shape shape{37, 5, 3};
  Tensor param = uniform_tensor(shape, 24), m = uniform_tensor(shape, 25, -0.1f, 0.1f);
  Tensor v = uniform_tensor(shape, 26, 0.0f, 0.01f);
  Tensor gpu_param = on_backend(param), gpu_m = on_backend(m), gpu_v = on_backend(v);
  ops::AdamStepOptions options;
  options.step_size = 1e-3f;
  options.inv_sqrt_bc2 = 1.25f;
  for (uint32_t step = 0; step < 3; ++step) {
    const Tensor grad = uniform_tensor(shape, 27 + step);
    ops::adam_step(param, grad, m, v, options);
    ops::adam_step(gpu_param, on_backend(grad), gpu_m, gpu_v, options);
  }
  expect_matches_cpu(param, gpu_param, kF32, "adam_step param");
  expect_matches_cpu(m, gpu_m, kF32, "adam_step m");
  expect_matches_cpu(v, gpu_v, kF32, "adam_step v");
}

TEST_P(BackendOpsBasic, GlobalNormScaleFill) {
  const std::vector<Tensor> cpu = {uniform_tensor({37, 5}, 30), Tensor{},
                                   uniform_tensor({300000}, 31), uniform_tensor({3, 517}, 32)};
  std::vector<Tensor> gpu;
  for (const Tensor& t : cpu) gpu.push_back(t.defined() ? on_backend(t) : Tensor{});
  const double expected = ops::global_norm(cpu);
  EXPECT_NEAR(ops::global_norm(gpu), expected, 1e-12 * expected);
  EXPECT_NEAR(ops::global_norm({gpu[0]}), ops::global_norm({cpu[0]}), 1e-12 * expected);
  // Run to run: the same sum, bit for bit (no float atomics).
  EXPECT_EQ(ops::global_norm(gpu), ops::global_norm(gpu));
  EXPECT_NEAR(backend().sum_squares(gpu[2].device_data<float>(), gpu[2].numel()),
              cpu::sum_squares(cpu[2].data<float>(), cpu[2].numel()), 1e-12 * expected * expected);
  EXPECT_EQ(backend().sum_squares(gpu[0].device_data<float>(), 0), 0.0);

  ops::scale_in_place(cpu, 0.25f);
  ops::scale_in_place(gpu, 0.25f);
  for (size_t i : {0u, 2u, 3u}) expect_same_bits(cpu[i], gpu[i], "scale_in_place");

  // fill overwrites NaN too.
  Tensor with_nan = uniform_tensor({37, 5}, 33);
  with_nan.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  Tensor gpu_nan = on_backend(with_nan);
  ops::fill_in_place({gpu_nan}, 1.5f);
  EXPECT_EQ(gpu_nan.to(Device::cpu).to_floats(), std::vector<float>(37 * 5, 1.5f));

  // The weights' moving average: the CPU's values to a rounding.
  Tensor average = uniform_tensor({300, 7}, 34), values = uniform_tensor({300, 7}, 35);
  Tensor gpu_average = on_backend(average);
  ops::moving_average(average, values, 0.9f);
  ops::moving_average(gpu_average, on_backend(values), 0.9f);
  const std::vector<float> want = average.to_floats(),
                           got = gpu_average.to(Device::cpu).to_floats();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST_P(BackendOpsBasic, ToBf16RoundsAsTheCpu) {
  // Random values, then the edge cases: ties (to even, both ways), the largest float (rounds to
  // infinity), infinities, signed zero, subnormals, quiet and signalling NaNs with payloads.
  std::vector<float> values = uniform_tensor({37, 5}, 34, -100.0f, 100.0f).to_floats();
  for (uint32_t bits :
       {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
        0x80000000u, 0x00000001u, 0x807fffffu, 0x7fc00001u, 0x7f800001u, 0xffbfffffu, 0x7fffffffu})
    values.push_back(std::bit_cast<float>(bits));
  const Tensor x = Tensor::from_floats({static_cast<int64_t>(values.size())}, values);
  const Tensor cpu_out = ops::to_bf16(x);
  const Tensor gpu_out = ops::to_bf16(on_backend(x));
  EXPECT_EQ(gpu_out.dtype(), DType::bf16);
  expect_same_bits(cpu_out, gpu_out, "to_bf16");
}

// linear_relu's fused backward kernel: the masked gradient and its bf16 copy, the same bits as
// the CPU's relu_backward followed by f32_to_bf16 (the unfused pair). Odd lengths take the
// kernel's scalar tail; the values include zeros, subnormals and a NaN.
TEST_P(BackendOpsBasic, ReluBackwardBf16IsReluBackwardThenToBf16) {
  for (int64_t n : {int64_t{4099}, int64_t{6}}) {
    Tensor y = uniform_tensor({n}, 35, -1.0f, 1.0f), g = uniform_tensor({n}, 36, -3.0f, 3.0f);
    y.data<float>()[1] = 0.0f;
    y.data<float>()[2] = std::bit_cast<float>(0x00000001u);
    g.data<float>()[2] = std::bit_cast<float>(0x00400001u);
    y.data<float>()[3] = 1.0f;
    g.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    Tensor want = Tensor::empty({n}), want_bf16 = Tensor::empty({n}, DType::bf16);
    cpu::relu_backward(y.data<float>(), g.data<float>(), want.data<float>(), n, false);
    cpu::f32_to_bf16(want.data<float>(), want_bf16.data<bf16>(), n);
    const Tensor gpu_y = on_backend(y), gpu_g = on_backend(g);
    Tensor dx = Tensor::empty({n}, DType::f32, tested_device());
    Tensor dx_bf16 = Tensor::empty({n}, DType::bf16, tested_device());
    backend().relu_backward_bf16(gpu_y.device_data<float>(), gpu_g.device_data<float>(),
                                 dx.device_data<float>(), dx_bf16.device_data<bf16>(), n);
    expect_same_bits(want, dx, "relu_backward_bf16's gradient, n " + std::to_string(n));
    expect_same_bits(want_bf16, dx_bf16, "relu_backward_bf16's copy, n " + std::to_string(n));
  }
}

}  // namespace basic

// ---- ops::attention and ops::attention_cached: outputs, every gradient, the probabilities, the
// masks and the attention dropout (a device draws the CPU's keep mask from the same hash, so the
// results agree to rounding).
namespace attention {

// f32 forward results: the same sums in another order.
constexpr double kForwardTolerance = 1e-5;
// Gradients: the same algorithm on both devices (P kept, dS = P (dP - sum_j dP_j P_j)), but the
// products and row sums add in other orders; dS then differs by the rounding of a difference of
// two sums, a few times the forward's.
constexpr double kGradTolerance = 5e-5;

struct Case {
  int64_t batch = 2, tq = 7, tk = 13;
  int heads = 2;
  int64_t dk = 5, dv = 5;  // per head
  ops::AttentionMask mask;
  float dropout = 0.0f;
  uint64_t seed = 0;
};

struct Result {
  Tensor out, probs, dq, dk, dv;
};

// Inputs as f32 CPU tensors, with the gradient seed of the output.
struct Inputs {
  Tensor q, k, v, d_out;
};

Inputs inputs_for(const Case& c, uint32_t seed) {
  return {uniform_tensor({c.batch, c.tq, c.heads * c.dk}, seed),
          uniform_tensor({c.batch, c.tk, c.heads * c.dk}, seed + 1),
          uniform_tensor({c.batch, c.tk, c.heads * c.dv}, seed + 2),
          uniform_tensor({c.batch, c.tq, c.heads * c.dv}, seed + 3)};
}

// A fresh copy on `device` that requires a gradient.
Tensor leaf(const Tensor& x, Device device) {
  Tensor t = device == Device::cpu ? x.clone() : x.to(device);
  t.set_requires_grad(true);
  return t;
}

Result run(const Case& c, const Inputs& in, Device device, bool with_probs) {
  Tensor q = leaf(in.q, device), k = leaf(in.k, device), v = leaf(in.v, device);
  Result r;
  Tape tape;
  {
    TapeScope scope(tape);
    r.out = ops::attention(q, k, v, c.heads, c.mask, c.dropout, c.seed,
                           with_probs ? &r.probs : nullptr);
  }
  tape.backward(r.out, in.d_out.to(device));
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  return r;
}

void check_case(const Case& c, uint32_t seed, const std::string& what, bool with_probs = false) {
  const Inputs in = inputs_for(c, seed);
  const Result cpu = run(c, in, Device::cpu, with_probs);
  const Result cuda = run(c, in, tested_device(), with_probs);
  expect_matches_cpu(cpu.out, cuda.out, kForwardTolerance, what + ": out");
  expect_matches_cpu(cpu.dq, cuda.dq, kGradTolerance, what + ": dq");
  expect_matches_cpu(cpu.dk, cuda.dk, kGradTolerance, what + ": dk");
  expect_matches_cpu(cpu.dv, cuda.dv, kGradTolerance, what + ": dv");
  if (with_probs) expect_matches_cpu(cpu.probs, cuda.probs, kForwardTolerance, what + ": probs");

  // Without a tape: the inference path of the same kernel.
  const Tensor out = ops::attention(on_backend(in.q), on_backend(in.k), on_backend(in.v), c.heads,
                                    c.mask, c.dropout, c.seed);
  expect_matches_cpu(cpu.out, out, kForwardTolerance, what + ": out without a tape");
}

TEST_P(BackendOpsAttention, OddShapesWithoutMask) {
  Case c;  // Tq = 7, Tk = 13, dk = dv = 5
  check_case(c, 10, "dk 5");
  c.dk = 8;
  c.dv = 3;
  c.heads = 4;
  check_case(c, 20, "dk 8, dv 3");
  c.dk = 1;
  c.dv = 1;
  c.heads = 1;
  check_case(c, 30, "dk 1");
}

TEST_P(BackendOpsAttention, Head64WithKeyPaddingOverSeveralTiles) {
  Case c;
  c.batch = 3;
  c.tq = 37;
  c.tk = 70;
  c.heads = 8;
  c.dk = c.dv = 64;
  c.mask.key_lengths = {70, 33, 1};
  check_case(c, 40, "dk 64, key lengths", true);
}

// The model's shapes at a longer length: 8 heads of 64 over 100 queries and keys, padded keys,
// then causal with dropout (the per-head products over the batch, rows of 100 > 32 lanes).
TEST_P(BackendOpsAttention, LongerSequencesEightHeadsWithPadding) {
  Case c;
  c.batch = 3;
  c.tq = c.tk = 100;
  c.heads = 8;
  c.dk = c.dv = 64;
  c.mask.key_lengths = {100, 57, 1};
  check_case(c, 300, "100 x 100, 8 heads, key lengths", true);
  c.mask.causal = true;
  c.dropout = 0.1f;
  c.seed = 77;
  check_case(c, 310, "100 x 100, 8 heads, key lengths, causal, dropout 0.1", true);
}

TEST_P(BackendOpsAttention, Head128AndUnequalWidths) {
  Case c;
  c.tq = 33;
  c.tk = 65;
  c.dk = c.dv = 128;
  check_case(c, 50, "dk 128");
  c.dk = 128;
  c.dv = 40;
  c.mask.key_lengths = {64, 65};
  check_case(c, 60, "dk 128, dv 40");
  c.dk = 33;
  c.dv = 100;
  check_case(c, 70, "dk 33, dv 100");
}

TEST_P(BackendOpsAttention, CausalSelfAttention) {
  Case c;
  c.tq = c.tk = 45;
  c.heads = 4;
  c.dk = c.dv = 64;
  c.mask.causal = true;
  check_case(c, 80, "causal", true);
  c.mask.key_lengths = {45, 17};
  check_case(c, 90, "causal with key lengths", true);
}

TEST_P(BackendOpsAttention, CausalWithQueryOffsetAndFewerQueries) {
  Case c;
  c.tq = 3;
  c.tk = 40;
  c.heads = 2;
  c.dk = c.dv = 64;
  c.mask.causal = true;
  c.mask.query_offset = 37;
  check_case(c, 100, "causal, offset 37", true);
  c.tq = 20;
  c.tk = 70;
  c.mask.query_offset = 50;
  c.mask.key_lengths = {70, 60};
  check_case(c, 110, "causal, offset 50, key lengths", true);
}

TEST_P(BackendOpsAttention, DropoutDropsTheCpuElements) {
  Case c;
  c.batch = 2;
  c.tq = 50;
  c.tk = 70;
  c.heads = 4;
  c.dk = c.dv = 64;
  c.dropout = 0.1f;
  c.seed = 1234;
  c.mask.key_lengths = {70, 41};
  check_case(c, 120, "dropout 0.1", true);
  c.dropout = 0.5f;
  c.seed = 99;
  c.mask.causal = true;
  c.tq = c.tk;
  check_case(c, 130, "dropout 0.5, causal", true);
  c.dk = 5;
  c.dv = 7;
  c.tq = 7;
  c.tk = 13;
  c.mask = {};
  check_case(c, 140, "dropout 0.5, odd widths", true);
}

// One tensor as several inputs: the gradients of its uses add up, whatever order the kernels write
// them in.
TEST_P(BackendOpsAttention, SharedInputsAccumulateGradients) {
  const int heads = 2;
  const Tensor x0 = uniform_tensor({2, 9, 2 * 16}, 150);
  const Tensor y0 = uniform_tensor({2, 9, 2 * 16}, 151);
  const Tensor seed = uniform_tensor({2, 9, 2 * 16}, 152);
  ops::AttentionMask mask;
  mask.key_lengths = {9, 5};
  // Which inputs are x (the rest y): q = k = v, q = k, q = v, k = v.
  const std::vector<std::vector<bool>> uses = {
      {true, true, true}, {true, true, false}, {true, false, true}, {false, true, true}};
  for (const auto& use : uses) {
    std::vector<Tensor> x_grad, y_grad;
    for (const Device device : {Device::cpu, tested_device()}) {
      Tensor x = leaf(x0, device), y = leaf(y0, device);
      Tape tape;
      Tensor out;
      {
        TapeScope scope(tape);
        out = ops::attention(use[0] ? x : y, use[1] ? x : y, use[2] ? x : y, heads, mask);
      }
      tape.backward(out, seed.to(device));
      x_grad.push_back(x.grad());
      y_grad.push_back(y.grad());
    }
    const std::string what = std::string("q, k, v from x: ") + (use[0] ? "q" : "") +
                             (use[1] ? "k" : "") + (use[2] ? "v" : "");
    expect_matches_cpu(x_grad[0], x_grad[1], kGradTolerance, what + ", dx");
    if (y_grad[0].defined())
      expect_matches_cpu(y_grad[0], y_grad[1], kGradTolerance, what + ", dy");
  }
}

// ---- attention_cached ----

// `x` rounded to bf16 (a CPU tensor).
Tensor to_bf16_tensor(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::bf16);
  const std::vector<float> v = x.to_floats();
  for (size_t i = 0; i < v.size(); ++i) out.data<bf16>()[i] = float_to_bf16(v[i]);
  return out;
}

struct CachedCase {
  int64_t batch = 3, tq = 1, rows = 5, capacity = 24, keys = 19;
  int heads = 8;
  int64_t dk = 64, dv = 64;
  ops::AttentionMask mask;
  bool slotted = false;
  DType dtype = DType::f32;
};

void check_cached(const CachedCase& c, uint32_t seed, const std::string& what) {
  const Tensor q = uniform_tensor({c.batch, c.tq, c.heads * c.dk}, seed);
  Tensor k = uniform_tensor({c.slotted ? c.rows : c.batch, c.capacity, c.heads * c.dk}, seed + 1);
  Tensor v = uniform_tensor({c.slotted ? c.rows : c.batch, c.capacity, c.heads * c.dv}, seed + 2);
  if (c.dtype == DType::bf16) {
    k = to_bf16_tensor(k);
    v = to_bf16_tensor(v);
  }
  Tensor slots;
  if (c.slotted) {
    std::vector<int32_t> table(static_cast<size_t>(c.batch * c.capacity));
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<int32_t>((i * 7 + i / 5) % static_cast<size_t>(c.rows));
    slots = Tensor::from_ints({c.batch, c.capacity}, table);
  }
  Tensor cpu_probs, cuda_probs, cuda_probs_device_slots;
  const Tensor cpu_out = ops::attention_cached(q, k, v, c.keys, c.heads, c.mask, &cpu_probs, slots);
  const Tensor qd = on_backend(q), kd = on_backend(k), vd = on_backend(v);
  // The slot table from the host, as the decoder keeps it.
  const Tensor cuda_out =
      ops::attention_cached(qd, kd, vd, c.keys, c.heads, c.mask, &cuda_probs, slots);
  // f32 arithmetic on both devices from the same (bf16 or f32) cache elements.
  expect_matches_cpu(cpu_out, cuda_out, kForwardTolerance, what + ": out");
  expect_matches_cpu(cpu_probs, cuda_probs, kForwardTolerance, what + ": probs");
  // Without probs, and with the slot table on the device.
  const Tensor device_slots = slots.defined() ? on_backend(slots) : Tensor();
  const Tensor plain =
      ops::attention_cached(qd, kd, vd, c.keys, c.heads, c.mask, nullptr, device_slots);
  expect_matches_cpu(cpu_out, plain, kForwardTolerance, what + ": out without probs");
}

TEST_P(BackendOpsAttentionCached, DecodingStepF32AndBf16) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    CachedCase c;
    c.dtype = dtype;
    const std::string name = dtype == DType::f32 ? "f32" : "bf16";
    check_cached(c, 200, name + " cache");
    c.mask.key_lengths = {19, 4, 11};
    check_cached(c, 210, name + " cache, key lengths");
    c.slotted = true;
    check_cached(c, 220, name + " cache, slots");
    c.mask = {};
    check_cached(c, 230, name + " cache, slots, no mask");
  }
}

TEST_P(BackendOpsAttentionCached, SeveralQueriesCausalAndOddWidths) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    CachedCase c;
    c.dtype = dtype;
    c.tq = 6;
    c.keys = 20;
    c.capacity = 40;
    c.mask.causal = true;
    c.mask.query_offset = 14;
    const std::string name = dtype == DType::f32 ? "f32" : "bf16";
    check_cached(c, 240, name + " cache, 6 causal queries");
    c.slotted = true;
    check_cached(c, 250, name + " cache, 6 causal queries, slots");
    c.heads = 3;
    c.dk = 5;
    c.dv = 8;
    c.tq = 7;
    c.keys = 13;
    c.mask = {};
    check_cached(c, 260, name + " cache, dk 5, dv 8, slots");
    c.slotted = false;
    c.keys = 40;  // the whole capacity, over two tiles
    check_cached(c, 270, name + " cache, dk 5, dv 8");
  }
}

}  // namespace attention

// ---- Cross-entropy, top-k and the key/value cache copies.
namespace loss_decoding {

constexpr double kTolerance = 1e-5;  // f32: the same sums in another order
constexpr int32_t kIgnore = -100;

// ---- cross_entropy ----

struct LossResult {
  ops::CrossEntropyResult result;
  Tensor dlogits;
};

LossResult run_loss(const Tensor& logits0, const Tensor& targets0, float eps, double normalizer,
                    Device device, float upstream) {
  Tensor logits = device == Device::cpu ? logits0.clone() : logits0.to(device);
  logits.set_requires_grad(true);
  LossResult r;
  Tape tape;
  {
    TapeScope scope(tape);
    r.result = ops::cross_entropy(logits, targets0.to(device), eps, kIgnore, normalizer);
  }
  tape.backward(r.result.loss, Tensor::full(Shape{}, upstream).to(device));
  r.dlogits = logits.grad();
  return r;
}

void check_loss(int64_t rows, int64_t vocab, float eps, double normalizer, uint32_t seed,
                const std::string& what) {
  const Tensor logits = uniform_tensor({rows, vocab}, seed, -4.0f, 4.0f);
  std::vector<int32_t> y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    y[static_cast<size_t>(r)] = r % 5 == 3 ? kIgnore : static_cast<int32_t>((r * 7919) % vocab);
  const Tensor targets = Tensor::from_ints({rows}, y);
  const LossResult cpu = run_loss(logits, targets, eps, normalizer, Device::cpu, 0.75f);
  const LossResult cuda = run_loss(logits, targets, eps, normalizer, tested_device(), 0.75f);
  EXPECT_EQ(cpu.result.tokens, cuda.result.tokens) << what;
  EXPECT_NEAR(cpu.result.nll_sum, cuda.result.nll_sum, 1e-5 * std::abs(cpu.result.nll_sum)) << what;
  expect_matches_cpu(cpu.result.loss, cuda.result.loss, kTolerance, what + ": loss");
  expect_matches_cpu(cpu.dlogits, cuda.dlogits, kTolerance, what + ": dlogits");
}

TEST_P(BackendOpsCrossEntropy, LossSumsAndGradient) {
  check_loss(7, 6, 0.0f, 0.0, 1, "7x6, no smoothing");
  check_loss(7, 6, 0.1f, 0.0, 2, "7x6, eps 0.1");
  check_loss(37, 1000, 0.1f, 0.0, 3, "37x1000, eps 0.1");
  check_loss(37, 1000, 0.1f, 250.0, 4, "37x1000, normalizer 250");
  check_loss(5, 37000, 0.1f, 0.0, 5, "5x37000");
  check_loss(300, 333, 1.0f, 0.0, 6, "300x333, eps 1");
}

TEST_P(BackendOpsCrossEntropy, AllRowsIgnoredAndBadTargets) {
  const Tensor logits = uniform_tensor({4, 9}, 7).to(tested_device());
  const Tensor ignored = Tensor::from_ints({4}, {kIgnore, kIgnore, kIgnore, kIgnore});
  const ops::CrossEntropyResult r = ops::cross_entropy(logits, on_backend(ignored), 0.1f, kIgnore);
  EXPECT_EQ(r.tokens, 0);
  EXPECT_EQ(r.nll_sum, 0.0);
  EXPECT_EQ(r.loss.to(Device::cpu).to_floats()[0], 0.0f);
  const Tensor bad = Tensor::from_ints({4}, {1, 9, 0, kIgnore}).to(tested_device());
  EXPECT_THROW(ops::cross_entropy(logits, bad, 0.1f, kIgnore), Error);
}

// The row kernels of the chunked output loss (ops/output_loss.cc) against the CPU's: row terms,
// lse, the in-place gradient and its bf16 copy.
TEST_P(BackendOpsCrossEntropy, RowKernels) {
  const int64_t rows = 11, vocab = 3001;
  const float eps = 0.1f, scale = 0.25f;
  const Tensor logits = uniform_tensor({rows, vocab}, 8, -3.0f, 3.0f);
  std::vector<int32_t> y(rows);
  for (int64_t r = 0; r < rows; ++r) y[r] = r == 4 ? kIgnore : static_cast<int32_t>(r * 271);
  const Tensor targets = Tensor::from_ints({rows}, y);
  const Tensor targets_d = on_backend(targets);

  Tensor cpu_stats = Tensor::zeros({rows, 2}), cpu_lse = Tensor::zeros({rows});
  cpu::cross_entropy_rows(logits.data<float>(), y.data(), rows, vocab, eps, kIgnore,
                          cpu_stats.data<float>(), cpu_lse.data<float>());
  Tensor stats = Tensor::zeros({rows, 2}).to(tested_device()),
         lse = Tensor::zeros({rows}).to(tested_device());
  const Tensor logits_d = on_backend(logits);
  backend().cross_entropy_rows(logits_d.device_data<float>(), targets_d.device_data<int32_t>(),
                               rows, vocab, eps, kIgnore, stats.device_data<float>(),
                               lse.device_data<float>());
  expect_matches_cpu(cpu_stats, stats, kTolerance, "row loss and nll");
  expect_matches_cpu(cpu_lse, lse, kTolerance, "lse");

  // The f32 gradient in place; with a bf16 copy, the copy (a GPU then writes only the copy).
  Tensor cpu_grad = logits.clone();
  Tensor cpu_bf16 = Tensor::empty({rows, vocab}, DType::bf16);
  cpu::cross_entropy_rows_with_grad(cpu_grad.data<float>(), y.data(), rows, vocab, eps, kIgnore,
                                    scale, cpu_stats.data<float>(), cpu_bf16.data<bf16>());
  for (bool copy : {false, true}) {
    Tensor grad = on_backend(logits);
    Tensor grad_bf16 = Tensor::empty({rows, vocab}, DType::bf16, tested_device());
    backend().cross_entropy_rows_with_grad(
        grad.device_data<float>(), targets_d.device_data<int32_t>(), rows, vocab, eps, kIgnore,
        scale, stats.device_data<float>(), copy ? grad_bf16.device_data<bf16>() : nullptr);
    expect_matches_cpu(cpu_stats, stats, kTolerance, "row loss and nll, with the gradient");
    if (copy) {
      expect_matches_cpu(cpu_bf16, grad_bf16, 1e-2, "bf16 gradient");  // bf16 rounding of either
    } else {
      expect_matches_cpu(cpu_grad, grad, kTolerance, "in-place gradient");
    }
  }
}

// ---- top_k ----

void expect_same_top_k(const ops::TopK& cpu, const ops::TopK& cuda, const std::string& what) {
  const std::vector<int32_t> counts = cpu.counts.to_ints();
  ASSERT_EQ(counts, cuda.counts.to(Device::cpu).to_ints()) << what;
  const int64_t k = cpu.values.dim(1);
  const std::vector<float> cv = cpu.values.to_floats(),
                           gv = cuda.values.to(Device::cpu).to_floats();
  const std::vector<int32_t> ci = cpu.indices.to_ints(),
                             gi = cuda.indices.to(Device::cpu).to_ints();
  for (size_t r = 0; r < counts.size(); ++r)
    for (int64_t j = 0; j < counts[r]; ++j) {
      const size_t at = r * static_cast<size_t>(k) + static_cast<size_t>(j);
      EXPECT_EQ(ci[at], gi[at]) << what << ": row " << r << ", entry " << j;
      EXPECT_EQ(cv[at], gv[at]) << what << ": row " << r << ", entry " << j;
    }
}

TEST_P(BackendOpsTopK, RandomRowsTiesInfinitiesAndExclusion) {
  const int64_t rows = 6, n = 37000;
  std::vector<float> x = uniform_tensor({rows, n}, 9, -20.0f, 0.0f).to_floats();
  const float inf = std::numeric_limits<float>::infinity();
  // Row 1: many equal maxima (ties go to the lower index).
  for (int64_t j = 100; j < n; j += 997) x[static_cast<size_t>(n + j)] = 1.0f;
  // Row 2: -inf and NaN everywhere but a few entries (fewer than k are filled).
  for (int64_t j = 0; j < n; ++j)
    x[static_cast<size_t>(2 * n + j)] = j % 2 ? -inf : std::numeric_limits<float>::quiet_NaN();
  x[static_cast<size_t>(2 * n + 5)] = 3.0f;
  x[static_cast<size_t>(2 * n + 36000)] = -1.0f;
  x[static_cast<size_t>(2 * n + 17)] = 3.0f;
  // Row 3: +inf entries enter; row 4: all equal.
  x[static_cast<size_t>(3 * n + 30000)] = inf;
  x[static_cast<size_t>(3 * n + 2)] = inf;
  for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(4 * n + j)] = -0.5f;
  // Row 5: the best entry is the excluded index.
  x[static_cast<size_t>(5 * n + 3)] = 10.0f;
  const Tensor t = Tensor::from_floats({rows, n}, x);
  const Tensor td = on_backend(t);
  for (const int64_t k : {1, 4, 8, 42, 64})
    for (const int64_t excluded : {int64_t{-1}, int64_t{3}}) {
      const std::string what = "k " + std::to_string(k) + ", excluded " + std::to_string(excluded);
      expect_same_top_k(ops::top_k(t, k, excluded), ops::top_k(td, k, excluded), what);
    }
}

TEST_P(BackendOpsTopK, ShortRows) {
  const Tensor t = uniform_tensor({33, 7}, 10);
  expect_same_top_k(ops::top_k(t, 8, -1), ops::top_k(on_backend(t), 8, -1), "n 7, k 8");
  expect_same_top_k(ops::top_k(t, 3, 0), ops::top_k(on_backend(t), 3, 0), "n 7, k 3");
}

// The output layer of a search step (ops::output_log_softmax_top) with an output bias (config
// output_bias): the CPU's fused kernel and the backend's product, log-softmax and top-k pick the
// same tokens with the same log-probabilities (products in another order: within f32 rounding).
TEST_P(BackendOpsTopK, OutputLayerWithBias) {
  const int64_t rows = 5, d = 32, vocab = 3000, k = 6;
  const Tensor hidden = uniform_tensor({rows, d}, 11), embedding = uniform_tensor({vocab, d}, 12);
  const Tensor bias = uniform_tensor({vocab}, 13, -4.0f, 4.0f);
  for (const Tensor& b : {Tensor(), bias}) {
    const std::string what = b.defined() ? "with bias" : "without bias";
    const ops::TopK cpu = ops::output_log_softmax_top(hidden, embedding, k, -1, {}, 1024, b);
    const ops::TopK gpu =
        ops::output_log_softmax_top(on_backend(hidden), on_backend(embedding), k, -1, {}, 1024,
                                    b.defined() ? on_backend(b) : Tensor());
    EXPECT_EQ(cpu.indices.to_ints(), gpu.indices.to(Device::cpu).to_ints()) << what;
    expect_matches_cpu(cpu.values, gpu.values, basic::kF32, what);
  }
}

// ---- cache_write, cache_gather ----

Tensor cache_tensor(const Shape& shape, uint32_t seed, DType dtype) {
  Tensor t = uniform_tensor(shape, seed);
  if (dtype == DType::f32) return t;
  Tensor out = Tensor::empty(shape, DType::bf16);
  const std::vector<float> v = t.to_floats();
  for (size_t i = 0; i < v.size(); ++i) out.data<bf16>()[i] = float_to_bf16(v[i]);
  return out;
}

void expect_equal(const Tensor& cpu, const Tensor& cuda, const std::string& what) {
  EXPECT_EQ(cuda.device(), tested_device()) << what;
  EXPECT_EQ(cpu.to_floats(), cuda.to(Device::cpu).to_floats()) << what;  // copies: exact
}

TEST_P(BackendOpsCache, WriteAndGather) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const int64_t width : {int64_t{12}, int64_t{3}, int64_t{64}}) {
      const std::string what =
          std::string(dtype == DType::f32 ? "f32" : "bf16") + ", width " + std::to_string(width);
      Tensor cache = cache_tensor({5, 9, width}, 11, dtype);
      Tensor cache_d = on_backend(cache);
      const Tensor values = cache_tensor({4, 2, width}, 12, dtype);
      ops::cache_write(cache, values, 3);
      ops::cache_write(cache_d, on_backend(values), 3);
      expect_equal(cache, cache_d, what + ": write");

      const std::vector<int64_t> rows = {4, 0, 2, 2};
      Tensor dst = cache_tensor({4, 7, width}, 13, dtype);
      Tensor dst_d = on_backend(dst);
      ops::cache_gather(cache, Tensor(), rows, 6, dst);
      ops::cache_gather(cache_d, Tensor(), rows, 6, dst_d);
      expect_equal(dst, dst_d, what + ": gather");

      std::vector<int32_t> table(5 * 9);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 3 + 1) % 5);
      const Tensor slots = Tensor::from_ints({5, 9}, table);
      ops::cache_gather(cache, slots, rows, 5, dst);
      ops::cache_gather(cache_d, slots, rows, 5, dst_d);  // the table from the host
      expect_equal(dst, dst_d, what + ": gather through slots");
      Tensor dst_d2 = cache_tensor({4, 7, width}, 13, dtype).to(tested_device());
      ops::cache_gather(cache_d, Tensor(), rows, 6, dst_d2);
      ops::cache_gather(cache_d, on_backend(slots), rows, 5, dst_d2);  // on the device
      expect_equal(dst, dst_d2, what + ": gather through device slots");
    }
  }
}

}  // namespace loss_decoding

// ---- The products (oneDNN on the CPU, cuBLASLt on a GPU): matmul in every transpose and batch
// layout with both gradients, linear and linear_relu (bias, packed and bf16 products), and the
// chunked output projection with its loss.
namespace products {

// Runs `op` on `inputs` (CPU tensors) on `device` with every input requiring a gradient, then a
// backward from `seed`; returns the output followed by each input's gradient, all on `device`.
std::vector<Tensor> run(Device device, const std::vector<Tensor>& inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& op,
                        const Tensor& seed) {
  std::vector<Tensor> on_device;
  for (const Tensor& t : inputs) {
    Tensor copy = t.to(device).clone();
    copy.set_requires_grad(true);
    on_device.push_back(copy);
  }
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    out = op(on_device);
  }
  tape.backward(out, seed.to(device));
  std::vector<Tensor> results{out};
  for (const Tensor& t : on_device) results.push_back(t.grad());
  return results;
}

void expect_same_on_both(const std::vector<Tensor>& inputs,
                         const std::function<Tensor(const std::vector<Tensor>&)>& op,
                         const Shape& out_shape, double tolerance, const std::string& what) {
  const Tensor seed = uniform_tensor(out_shape, 99);
  const std::vector<Tensor> cpu = run(Device::cpu, inputs, op, seed);
  const std::vector<Tensor> gpu = run(tested_device(), inputs, op, seed);
  ASSERT_EQ(cpu.size(), gpu.size());
  expect_matches_cpu(cpu[0], gpu[0], tolerance, what + ": output");
  for (size_t i = 1; i < cpu.size(); ++i)
    expect_matches_cpu(cpu[i], gpu[i], tolerance, what + ": gradient " + std::to_string(i - 1));
}

TEST_P(BackendMatmul, EveryTransposeAndBatchLayoutWithGradients) {
  const int64_t m = 7, k = 13, n = 5;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      const std::string what =
          std::string("trans_a ") + (trans_a ? "1" : "0") + " trans_b " + (trans_b ? "1" : "0");
      // Batched [3, 2, ...] with b batched too, and with b shared (rank 2).
      for (bool shared_b : {false, true}) {
        const Shape a_shape = trans_a ? Shape{3, 2, k, m} : Shape{3, 2, m, k};
        const Shape b_shape = shared_b ? (trans_b ? Shape{n, k} : Shape{k, n})
                                       : (trans_b ? Shape{3, 2, n, k} : Shape{3, 2, k, n});
        expect_same_on_both(
            {uniform_tensor(a_shape, 1), uniform_tensor(b_shape, 2)},
            [&](const std::vector<Tensor>& t) { return ops::matmul(t[0], t[1], trans_a, trans_b); },
            Shape{3, 2, m, n}, 1e-5, what + (shared_b ? " shared b" : " batched b"));
      }
    }
  }
}

TEST_P(BackendMatmul, SameTensorOnBothSidesAccumulatesItsGradient) {
  expect_same_on_both(
      {uniform_tensor({6, 6}, 3)},
      [](const std::vector<Tensor>& t) { return ops::matmul(t[0], t[0], false, true); },
      Shape{6, 6}, 1e-5, "x x^T");
}

TEST_P(BackendLinear, BiasReluAndBf16ProductsWithGradients) {
  const Tensor x = uniform_tensor({2, 9, 24}, 4), w = uniform_tensor({37, 24}, 5),
               b = uniform_tensor({37}, 6);
  for (DType product : {DType::f32, DType::bf16}) {
    // bf16 operands: each device rounds the same operands, but sums in another order.
    const double tolerance = product == DType::f32 ? 1e-5 : 1e-2;
    const std::string type(dtype_name(product));
    expect_same_on_both(
        {x, w, b},
        [&](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], t[2], {product}); },
        Shape{2, 9, 37}, tolerance, "linear " + type);
    expect_same_on_both(
        {x, w, b},
        [&](const std::vector<Tensor>& t) { return ops::linear_relu(t[0], t[1], t[2], {product}); },
        Shape{2, 9, 37}, tolerance, "linear_relu " + type);
    expect_same_on_both(
        {x, w},
        [&](const std::vector<Tensor>& t) { return ops::linear(t[0], t[1], Tensor(), {product}); },
        Shape{2, 9, 37}, tolerance, "linear without bias " + type);
  }
}

TEST_P(BackendLinear, PackedWeightsGiveTheUnpackedProduct) {
  const Tensor x = uniform_tensor({11, 24}, 7), w = uniform_tensor({37, 24}, 8),
               b = uniform_tensor({37}, 9);
  for (DType product : {DType::f32, DType::bf16}) {
    const Tensor gx = on_backend(x), gw = on_backend(w), gb = on_backend(b);
    const auto packed = ops::pack_weight(gw, product);
    EXPECT_EQ(packed->device(), tested_device());
    EXPECT_EQ(packed->dtype(), product);
    const Tensor expected = ops::linear_relu(x, w, b, {product});
    const Tensor actual = ops::linear_relu(gx, gw, gb, {product, packed.get()});
    expect_matches_cpu(expected, actual, product == DType::f32 ? 1e-5 : 1e-2,
                       std::string("packed ") + std::string(dtype_name(product)));
  }
}

TEST_P(BackendOutputCrossEntropy, LossSumsAndGradientsMatchTheCpu) {
  const int64_t d = 16, vocab = 37;
  const std::vector<int32_t> targets = {3, 36, -100, 0, 7, -100, 4, 4, 20, 1, 9};
  const Tensor h = uniform_tensor({11, d}, 10), w = uniform_tensor({vocab, d}, 11);
  for (DType product : {DType::f32, DType::bf16}) {
    for (int64_t chunk : {0, 4}) {
      ops::CrossEntropyResult result[2];
      Tensor grads[2][2];
      for (const int i : {0, 1}) {
        const Device device = i == 0 ? Device::cpu : tested_device();
        Tensor hd = h.to(device).clone(), wd = w.to(device).clone();
        hd.set_requires_grad(true);
        wd.set_requires_grad(true);
        Tape tape;
        {
          TapeScope scope(tape);
          result[i] = ops::output_cross_entropy(hd, wd, Tensor::from_ints({11}, targets).to(device),
                                                0.1f, -100, 0.0, chunk, product);
        }
        tape.backward(result[i].loss, Tensor::full(Shape{}, 0.7f));
        grads[i][0] = hd.grad();
        grads[i][1] = wd.grad();
      }
      const double tolerance = product == DType::f32 ? 1e-5 : 1e-2;
      const std::string what = std::string(dtype_name(product)) + " chunk " + std::to_string(chunk);
      EXPECT_EQ(result[1].tokens, 9) << what;
      EXPECT_NEAR(result[1].nll_sum, result[0].nll_sum, tolerance * result[0].nll_sum) << what;
      const float loss_cpu = result[0].loss.to_floats()[0],
                  loss_gpu = result[1].loss.to_floats()[0];
      EXPECT_NEAR(loss_gpu, loss_cpu, tolerance * loss_cpu) << what;
      expect_matches_cpu(grads[0][0], grads[1][0], tolerance, what + ": d hidden");
      expect_matches_cpu(grads[0][1], grads[1][1], tolerance, what + ": d weight");
    }
  }
}

TEST_P(BackendOutputCrossEntropy, TargetOutsideTheVocabularyIsAnError) {
  const Tensor h = uniform_tensor({2, 8}, 12).to(tested_device());
  const Tensor w = uniform_tensor({5, 8}, 13).to(tested_device());
  const Tensor y = Tensor::from_ints({2}, {1, 5}).to(tested_device());
  EXPECT_THROW(ops::output_cross_entropy(h, w, y, 0.1f, -100), Error);
}

}  // namespace products

}  // namespace
}  // namespace tfm::internal
