// ops::linear_swish and ops::linear_gelu: with a packed weight in inference, one product that
// applies the activation in its stores (the CPU's f32 and int8 panel kernels; a second pass after
// oneDNN's products), the same bits as ops::swish or ops::gelu after ops::linear on every path:
// f32, bf16 and int8 weights, row counts on each side of the panel kernels' limits and of the row
// split, with and without a bias; in training, the two ops with their gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gradcheck.h"
#include "op_test_values.h"
#include "tfm/autograd/tape.h"
#include "tfm/ops/ops.h"
#include "tfm/ops/packed_weight.h"

namespace tfm::internal {
namespace {

using testing::differing_bits;
using testing::random_values;

Tensor random_tensor(const Shape& shape, std::mt19937& rng, float scale = 1.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const testing::Values v = random_values(n, rng);
  std::vector<float> values(v.begin(), v.end());
  for (float& value : values) value *= scale;
  return Tensor::from_floats(shape, values);
}

// The fused op and the two ops it stands for, by name.
struct Activation {
  const char* name;
  Tensor (*fused)(const Tensor&, const Tensor&, const Tensor&, const ops::ProductOptions&);
  Tensor (*after)(const Tensor&);
};
const Activation kActivations[] = {{"swish", ops::linear_swish, ops::swish},
                                   {"gelu", ops::linear_gelu, ops::gelu}};

TEST(OpsLinearActivations, PackedTheSameBitsAsTheActivationAfterTheProduct) {
  std::mt19937 rng(17);
  const int64_t k = 96, out = 200;  // 4 panels of 64 columns, the last of 8
  for (const Activation& activation : kActivations)
    for (DType type : {DType::f32, DType::bf16, DType::i8})
      for (int64_t rows : {1, 5, 32, 128, 300})
        for (bool with_bias : {true, false}) {
          SCOPED_TRACE(fmt::format("{}, {} weight, {} rows, bias {}", activation.name,
                                   dtype_name(type), rows, with_bias));
          // Weights of a few units: outputs far into both tails (swish -> 0 from below, -> y above)
          // as well as near 0, where it is neither.
          const Tensor w = random_tensor({out, k}, rng, 3.0f);
          const Tensor b = with_bias ? random_tensor({out}, rng) : Tensor();
          const auto packed = ops::pack_weight(w, type);
          const DType precision = type == DType::i8 ? DType::f32 : type;
          const Tensor x = random_tensor({rows, 1, k}, rng);
          const Tensor fused = activation.fused(x, w, b, {precision, packed.get()});
          const Tensor plain = ops::linear(x, w, b, {precision, packed.get()});
          const Tensor expected = activation.after(plain);
          EXPECT_EQ(differing_bits(fused, expected), 0);
          // The outputs are not all alike: the activation took large negatives to about 0, kept
          // large positives, and bent the ones near 0.
          int64_t flattened = 0, kept = 0, bent = 0;
          const std::vector<float> y = plain.to_floats(), z = fused.to_floats();
          for (size_t i = 0; i < y.size(); ++i) {
            flattened += y[i] < -10.0f && std::fabs(z[i]) < 1e-3f;
            kept += y[i] > 10.0f && std::fabs(z[i] - y[i]) < 1e-3f * y[i];
            bent += std::fabs(y[i]) < 1.0f && std::fabs(z[i] - y[i]) > 0.1f * std::fabs(y[i]);
          }
          EXPECT_GT(flattened, 0);
          EXPECT_GT(kept, 0);
          EXPECT_GT(bent, 0);
        }
}

// Training (no packed weight): the activation after linear, with the same gradients.
TEST(OpsLinearActivations, UnpackedIsTheActivationAfterLinearWithItsGradients) {
  struct Run {
    Tensor y, dx, dw, db;
  };
  auto run = [](const Activation& activation, bool fused) {
    std::mt19937 values(23);
    Tensor x = random_tensor({7, 12}, values), w = random_tensor({9, 12}, values),
           b = random_tensor({9}, values);
    const Tensor seed = random_tensor({7, 9}, values);
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    Tape tape;
    Tensor y;
    {
      TapeScope scope(tape);
      y = fused ? activation.fused(x, w, b, {}) : activation.after(ops::linear(x, w, b));
    }
    tape.backward(y, seed);
    return Run{y, x.grad(), w.grad(), b.grad()};
  };
  for (const Activation& activation : kActivations) {
    SCOPED_TRACE(activation.name);
    const Run fused = run(activation, true), plain = run(activation, false);
    EXPECT_EQ(differing_bits(fused.y, plain.y), 0);
    EXPECT_EQ(differing_bits(fused.dx, plain.dx), 0);
    EXPECT_EQ(differing_bits(fused.dw, plain.dw), 0);
    EXPECT_EQ(differing_bits(fused.db, plain.db), 0);
    float largest = 0;
    for (float v : fused.dw.to_floats()) largest = std::max(largest, std::fabs(v));
    EXPECT_GT(largest, 0.1f);
  }
}

}  // namespace
}  // namespace tfm::internal
