// The element-wise, dropout, LayerNorm, softmax, embedding, optimizer and bf16 conversion ops on
// CUDA against the CPU on the same random inputs: forward results and every gradient (inputs and
// parameters), including the accumulating paths (a tensor used twice). Skipped without a GPU.
//
// Tolerances are relative norms (cuda_test_util.h). f32: 1e-5 where the devices sum in another
// order; exact where both do the same arithmetic (dropout's mask and scale, embedding lookups,
// conversions); global norms 1e-12 (both sum exact squares in double).
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
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/optimizer_cpu.h"
#include "tfm/kernels/cpu/softmax_cpu.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/ops.h"

#ifdef TFM_HAVE_CUDA
#include "tfm/kernels/cuda/elementwise_cuda.h"
#include "tfm/kernels/cuda/optimizer_cuda.h"
#include "tfm/kernels/cuda/softmax_cuda.h"
#endif

namespace tfm {
namespace {

using testing::expect_matches_cpu;
using testing::uniform_tensor;

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
  const Run gpu = run_on(Device::cuda, inputs, trainable, op);
  expect_matches_cpu(cpu.out, gpu.out, tolerance, what + " forward");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!trainable[i]) continue;
    expect_matches_cpu(cpu.grads[i], gpu.grads[i], tolerance,
                       what + " gradient of input " + std::to_string(i));
  }
}

// The same bytes on both devices.
void expect_same_bits(const Tensor& cpu, const Tensor& cuda, const std::string& what) {
  ASSERT_EQ(cuda.device(), Device::cuda) << what;
  const Tensor back = cuda.to(Device::cpu);
  ASSERT_EQ(cpu.dtype(), back.dtype()) << what;
  ASSERT_EQ(cpu.shape(), back.shape()) << what;
  EXPECT_EQ(std::memcmp(cpu.raw(), back.raw(), cpu.nbytes()), 0) << what;
}

TEST(CudaOpsBasic, AddReluReshape) {
  TFM_REQUIRE_CUDA();
  const Tensor a = uniform_tensor({37, 5}, 1), b = uniform_tensor({37, 5}, 2);
  expect_op_matches("add", {a, b}, {true, true}, [](auto& x) { return ops::add(x[0], x[1]); });
  // add(x, x): the second write of x's gradient accumulates.
  expect_op_matches("add(x, x)", {a}, {true}, [](auto& x) { return ops::add(x[0], x[0]); });
  expect_op_matches("relu", {a}, {true}, [](auto& x) { return ops::relu(x[0]); });
  // relu's backward adds to the gradient the add wrote first.
  expect_op_matches("add(relu(x), x)", {a}, {true},
                    [](auto& x) { return ops::add(ops::relu(x[0]), x[0]); });
  expect_op_matches("reshape", {a, uniform_tensor({5, 37}, 3)}, {true, true}, [](auto& x) {
    return ops::add(ops::add(ops::reshape(x[0], {5, 37}), ops::reshape(ops::relu(x[0]), {5, 37})),
                    ops::reshape(x[1], {5, 37}));
  });
}

TEST(CudaOpsBasic, WriteGradAndSumRowsKernels) {
  TFM_REQUIRE_CUDA();
#ifdef TFM_HAVE_CUDA
  for (bool accumulate : {false, true}) {
    const std::string how = accumulate ? " (accumulate)" : "";
    const Tensor src = uniform_tensor({37, 5}, 4);
    Tensor cpu_dst = uniform_tensor({37, 5}, 5);
    Tensor gpu_dst = cpu_dst.to(Device::cuda);
    const Tensor gpu_src = src.to(Device::cuda);
    cpu::write_grad(cpu_dst.data<float>(), src.data<float>(), src.numel(), accumulate, 0.375f);
    cuda::write_grad(gpu_dst.device_data<float>(), gpu_src.device_data<float>(), src.numel(),
                     accumulate, 0.375f);
    expect_matches_cpu(cpu_dst, gpu_dst, kF32, "write_grad with scale" + how);

    // Bias gradients: column sums of [rows, cols], with rows over several of the kernel's passes
    // and a ragged last block of columns.
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 5}, {300, 517}, {0, 7}}) {
      const Tensor m = uniform_tensor({rows, cols}, 6);
      Tensor cpu_sum = uniform_tensor({cols}, 7);
      Tensor gpu_sum = cpu_sum.to(Device::cuda);
      const Tensor gpu_m = m.to(Device::cuda);
      cpu::sum_rows(m.data<float>(), rows, cols, cpu_sum.data<float>(), accumulate);
      const int64_t floats = cuda::sum_rows_workspace(rows, cols);
      Tensor workspace = Tensor::empty({floats > 0 ? floats : 1}, DType::f32, Device::cuda);
      cuda::sum_rows(gpu_m.device_data<float>(), rows, cols, gpu_sum.device_data<float>(),
                     accumulate, workspace.device_data<float>());
      if (rows == 0 && !accumulate) {
        EXPECT_EQ(gpu_sum.to(Device::cpu).to_floats(), std::vector<float>(cols, 0.0f));
      } else {
        expect_matches_cpu(cpu_sum, gpu_sum, kF32,
                           "sum_rows " + std::to_string(rows) + "x" + std::to_string(cols) + how);
      }
    }
  }
#endif
}

TEST(CudaOpsBasic, DropoutDropsTheCpuElements) {
  TFM_REQUIRE_CUDA();
  const Tensor x = uniform_tensor({37, 5, 11}, 8);
  for (float p : {0.1f, 0.5f}) {
    const std::string what = "dropout p=" + std::to_string(p);
    // Forward: the same mask and the same scaled values, bit for bit.
    const Tensor cpu_out = ops::dropout(x, p, 1234);
    const Tensor gpu_out = ops::dropout(x.to(Device::cuda), p, 1234);
    expect_same_bits(cpu_out, gpu_out, what);
    expect_op_matches(what, {x}, {true}, [p](auto& in) { return ops::dropout(in[0], p, 77); });
    // The backward adds into the gradient the add wrote first.
    expect_op_matches(what + " + x", {x}, {true},
                      [p](auto& in) { return ops::add(ops::dropout(in[0], p, 78), in[0]); });
  }
}

TEST(CudaOpsBasic, LayerNorm) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsBasic, AddDropoutLayerNorm) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsBasic, Softmax) {
  TFM_REQUIRE_CUDA();
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
TEST(CudaOpsBasic, SoftmaxOfAVocabularySizedRowAgainstDouble) {
  TFM_REQUIRE_CUDA();
  const int64_t rows = 3, n = 37000;
  const Tensor x = uniform_tensor({rows, n}, 18, -8.0f, 8.0f), g = uniform_tensor({rows, n}, 21);
  const auto [y_ref, dx_ref] = softmax_reference(x.to_floats(), g.to_floats(), rows, n);
  for (Device device : {Device::cpu, Device::cuda}) {
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
    if (device == Device::cuda) {
      EXPECT_LE(y_error, kF32);
      EXPECT_LE(dx_error, kF32);
    }
  }
}

TEST(CudaOpsBasic, LogSoftmaxKernel) {
  TFM_REQUIRE_CUDA();
#ifdef TFM_HAVE_CUDA
  for (const Shape& shape : {Shape{37, 5}, Shape{4, 37000}}) {
    const Tensor x = uniform_tensor(shape, 19, -8.0f, 8.0f);
    const int64_t rows = shape[0], n = shape[1];
    Tensor cpu_y = Tensor::empty(shape);
    cpu::log_softmax(x.data<float>(), cpu_y.data<float>(), rows, n);
    Tensor gpu_y = Tensor::empty(shape, DType::f32, Device::cuda);
    const Tensor gpu_x = x.to(Device::cuda);
    cuda::log_softmax(gpu_x.device_data<float>(), gpu_y.device_data<float>(), rows, n);
    expect_matches_cpu(cpu_y, gpu_y, kF32, "log_softmax " + shape.str());
    // In place (y = x).
    Tensor in_place = x.to(Device::cuda);
    cuda::log_softmax(in_place.device_data<float>(), in_place.device_data<float>(), rows, n);
    expect_matches_cpu(cpu_y, in_place, kF32, "log_softmax in place " + shape.str());
  }
#endif
}

TEST(CudaOpsBasic, Embedding) {
  TFM_REQUIRE_CUDA();
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
  const Tensor gpu_out = ops::embedding(ids.to(Device::cuda), table.to(Device::cuda), 2.5f);
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

TEST(CudaOpsBasic, EmbeddingOutOfRangeIdGivesNaN) {
  TFM_REQUIRE_CUDA();
  // CUDA ids are not checked on the host (ops/embedding.cc): the row of a bad id is NaN, and
  // nothing is read out of bounds.
  // The backward leaves the table's gradient alone for them and sums the others.
  const Tensor ids = Tensor::from_ints({4}, {1, 11, -1, 1}).to(Device::cuda);
  Tensor table = uniform_tensor({11, 4}, 21).to(Device::cuda);
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

TEST(CudaOpsBasic, AddPositions) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsBasic, AdamStep) {
  TFM_REQUIRE_CUDA();
  const Shape shape{37, 5, 3};
  Tensor param = uniform_tensor(shape, 24), m = uniform_tensor(shape, 25, -0.1f, 0.1f);
  Tensor v = uniform_tensor(shape, 26, 0.0f, 0.01f);
  Tensor gpu_param = param.to(Device::cuda), gpu_m = m.to(Device::cuda), gpu_v = v.to(Device::cuda);
  ops::AdamStepOptions options;
  options.step_size = 1e-3f;
  options.inv_sqrt_bc2 = 1.25f;
  for (uint32_t step = 0; step < 3; ++step) {
    const Tensor grad = uniform_tensor(shape, 27 + step);
    ops::adam_step(param, grad, m, v, options);
    ops::adam_step(gpu_param, grad.to(Device::cuda), gpu_m, gpu_v, options);
  }
  expect_matches_cpu(param, gpu_param, kF32, "adam_step param");
  expect_matches_cpu(m, gpu_m, kF32, "adam_step m");
  expect_matches_cpu(v, gpu_v, kF32, "adam_step v");
}

TEST(CudaOpsBasic, GlobalNormScaleFill) {
  TFM_REQUIRE_CUDA();
  const std::vector<Tensor> cpu = {uniform_tensor({37, 5}, 30), Tensor{},
                                   uniform_tensor({300000}, 31), uniform_tensor({3, 517}, 32)};
  std::vector<Tensor> gpu;
  for (const Tensor& t : cpu) gpu.push_back(t.defined() ? t.to(Device::cuda) : Tensor{});
  const double expected = ops::global_norm(cpu);
  EXPECT_NEAR(ops::global_norm(gpu), expected, 1e-12 * expected);
  EXPECT_NEAR(ops::global_norm({gpu[0]}), ops::global_norm({cpu[0]}), 1e-12 * expected);
  // Run to run: the same sum, bit for bit (no float atomics).
  EXPECT_EQ(ops::global_norm(gpu), ops::global_norm(gpu));
#ifdef TFM_HAVE_CUDA
  EXPECT_NEAR(cuda::sum_squares(gpu[2].device_data<float>(), gpu[2].numel()),
              cpu::sum_squares(cpu[2].data<float>(), cpu[2].numel()), 1e-12 * expected * expected);
  EXPECT_EQ(cuda::sum_squares(gpu[0].device_data<float>(), 0), 0.0);
#endif

  ops::scale_in_place(cpu, 0.25f);
  ops::scale_in_place(gpu, 0.25f);
  for (size_t i : {0u, 2u, 3u}) expect_same_bits(cpu[i], gpu[i], "scale_in_place");

  // fill overwrites NaN too.
  Tensor with_nan = uniform_tensor({37, 5}, 33);
  with_nan.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  Tensor gpu_nan = with_nan.to(Device::cuda);
  ops::fill_in_place({gpu_nan}, 1.5f);
  EXPECT_EQ(gpu_nan.to(Device::cpu).to_floats(), std::vector<float>(37 * 5, 1.5f));
}

TEST(CudaOpsBasic, ToBf16RoundsAsTheCpu) {
  TFM_REQUIRE_CUDA();
  // Random values, then the edge cases: ties (to even, both ways), the largest float (rounds to
  // infinity), infinities, signed zero, subnormals, quiet and signalling NaNs with payloads.
  std::vector<float> values = uniform_tensor({37, 5}, 34, -100.0f, 100.0f).to_floats();
  for (uint32_t bits :
       {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
        0x80000000u, 0x00000001u, 0x807fffffu, 0x7fc00001u, 0x7f800001u, 0xffbfffffu, 0x7fffffffu})
    values.push_back(std::bit_cast<float>(bits));
  const Tensor x = Tensor::from_floats({static_cast<int64_t>(values.size())}, values);
  const Tensor cpu_out = ops::to_bf16(x);
  const Tensor gpu_out = ops::to_bf16(x.to(Device::cuda));
  EXPECT_EQ(gpu_out.dtype(), DType::bf16);
  expect_same_bits(cpu_out, gpu_out, "to_bf16");
}

}  // namespace
}  // namespace tfm
