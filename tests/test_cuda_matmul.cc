// The products on a GPU (cuBLASLt) against the CPU's (oneDNN) on the same random inputs: matmul in
// every transpose and batch layout with both gradients, linear and linear_relu (bias, packed and
// bf16 products), and the chunked output projection with its loss. Skipped, saying why, without a
// usable GPU.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cuda_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm {
namespace {

using testing::expect_matches_cpu;
using testing::uniform_tensor;

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
  const std::vector<Tensor> gpu = run(Device::cuda, inputs, op, seed);
  ASSERT_EQ(cpu.size(), gpu.size());
  expect_matches_cpu(cpu[0], gpu[0], tolerance, what + ": output");
  for (size_t i = 1; i < cpu.size(); ++i)
    expect_matches_cpu(cpu[i], gpu[i], tolerance, what + ": gradient " + std::to_string(i - 1));
}

TEST(CudaMatmul, EveryTransposeAndBatchLayoutWithGradients) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaMatmul, SameTensorOnBothSidesAccumulatesItsGradient) {
  TFM_REQUIRE_CUDA();
  expect_same_on_both(
      {uniform_tensor({6, 6}, 3)},
      [](const std::vector<Tensor>& t) { return ops::matmul(t[0], t[0], false, true); },
      Shape{6, 6}, 1e-5, "x x^T");
}

TEST(CudaLinear, BiasReluAndBf16ProductsWithGradients) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaLinear, PackedWeightsGiveTheUnpackedProduct) {
  TFM_REQUIRE_CUDA();
  const Tensor x = uniform_tensor({11, 24}, 7), w = uniform_tensor({37, 24}, 8),
               b = uniform_tensor({37}, 9);
  for (DType product : {DType::f32, DType::bf16}) {
    const Tensor gx = x.to(Device::cuda), gw = w.to(Device::cuda), gb = b.to(Device::cuda);
    const auto packed = ops::pack_weight(gw, product);
    EXPECT_EQ(packed->device(), Device::cuda);
    EXPECT_EQ(packed->dtype(), product);
    const Tensor expected = ops::linear_relu(x, w, b, {product});
    const Tensor actual = ops::linear_relu(gx, gw, gb, {product, packed.get()});
    expect_matches_cpu(expected, actual, product == DType::f32 ? 1e-5 : 1e-2,
                       std::string("packed ") + std::string(dtype_name(product)));
  }
}

TEST(CudaOutputCrossEntropy, LossSumsAndGradientsMatchTheCpu) {
  TFM_REQUIRE_CUDA();
  const int64_t d = 16, vocab = 37;
  const std::vector<int32_t> targets = {3, 36, -100, 0, 7, -100, 4, 4, 20, 1, 9};
  const Tensor h = uniform_tensor({11, d}, 10), w = uniform_tensor({vocab, d}, 11);
  for (DType product : {DType::f32, DType::bf16}) {
    for (int64_t chunk : {0, 4}) {
      ops::CrossEntropyResult result[2];
      Tensor grads[2][2];
      for (Device device : {Device::cpu, Device::cuda}) {
        const int i = device == Device::cpu ? 0 : 1;
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

TEST(CudaOutputCrossEntropy, TargetOutsideTheVocabularyIsAnError) {
  TFM_REQUIRE_CUDA();
  const Tensor h = uniform_tensor({2, 8}, 12).to(Device::cuda);
  const Tensor w = uniform_tensor({5, 8}, 13).to(Device::cuda);
  const Tensor y = Tensor::from_ints({2}, {1, 5}).to(Device::cuda);
  EXPECT_THROW(ops::output_cross_entropy(h, w, y, 0.1f, -100), Error);
}

}  // namespace
}  // namespace tfm
