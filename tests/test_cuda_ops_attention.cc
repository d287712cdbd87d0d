// ops::attention and ops::attention_cached on CUDA against the CPU on the same random inputs:
// outputs, every gradient, the probabilities, the masks and the attention dropout (the CUDA kernel
// draws the CPU's keep mask from the same hash, so the results agree to rounding).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/ops/ops.h"

namespace tfm {
namespace {

using testing::expect_matches_cpu;
using testing::uniform_tensor;

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
  const Result cuda = run(c, in, Device::cuda, with_probs);
  expect_matches_cpu(cpu.out, cuda.out, kForwardTolerance, what + ": out");
  expect_matches_cpu(cpu.dq, cuda.dq, kGradTolerance, what + ": dq");
  expect_matches_cpu(cpu.dk, cuda.dk, kGradTolerance, what + ": dk");
  expect_matches_cpu(cpu.dv, cuda.dv, kGradTolerance, what + ": dv");
  if (with_probs) expect_matches_cpu(cpu.probs, cuda.probs, kForwardTolerance, what + ": probs");

  // Without a tape: the inference path of the same kernel.
  const Tensor out = ops::attention(in.q.to(Device::cuda), in.k.to(Device::cuda),
                                    in.v.to(Device::cuda), c.heads, c.mask, c.dropout, c.seed);
  expect_matches_cpu(cpu.out, out, kForwardTolerance, what + ": out without a tape");
}

TEST(CudaOpsAttention, OddShapesWithoutMask) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsAttention, Head64WithKeyPaddingOverSeveralTiles) {
  TFM_REQUIRE_CUDA();
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
TEST(CudaOpsAttention, LongerSequencesEightHeadsWithPadding) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsAttention, Head128AndUnequalWidths) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsAttention, CausalSelfAttention) {
  TFM_REQUIRE_CUDA();
  Case c;
  c.tq = c.tk = 45;
  c.heads = 4;
  c.dk = c.dv = 64;
  c.mask.causal = true;
  check_case(c, 80, "causal", true);
  c.mask.key_lengths = {45, 17};
  check_case(c, 90, "causal with key lengths", true);
}

TEST(CudaOpsAttention, CausalWithQueryOffsetAndFewerQueries) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsAttention, DropoutDropsTheCpuElements) {
  TFM_REQUIRE_CUDA();
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
TEST(CudaOpsAttention, SharedInputsAccumulateGradients) {
  TFM_REQUIRE_CUDA();
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
    for (const Device device : {Device::cpu, Device::cuda}) {
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
  const Tensor qd = q.to(Device::cuda), kd = k.to(Device::cuda), vd = v.to(Device::cuda);
  // The slot table from the host, as the decoder keeps it.
  const Tensor cuda_out =
      ops::attention_cached(qd, kd, vd, c.keys, c.heads, c.mask, &cuda_probs, slots);
  // f32 arithmetic on both devices from the same (bf16 or f32) cache elements.
  expect_matches_cpu(cpu_out, cuda_out, kForwardTolerance, what + ": out");
  expect_matches_cpu(cpu_probs, cuda_probs, kForwardTolerance, what + ": probs");
  // Without probs, and with the slot table on the device.
  const Tensor device_slots = slots.defined() ? slots.to(Device::cuda) : Tensor();
  const Tensor plain =
      ops::attention_cached(qd, kd, vd, c.keys, c.heads, c.mask, nullptr, device_slots);
  expect_matches_cpu(cpu_out, plain, kForwardTolerance, what + ": out without probs");
}

TEST(CudaOpsAttentionCached, DecodingStepF32AndBf16) {
  TFM_REQUIRE_CUDA();
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

TEST(CudaOpsAttentionCached, SeveralQueriesCausalAndOddWidths) {
  TFM_REQUIRE_CUDA();
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

}  // namespace
}  // namespace tfm
