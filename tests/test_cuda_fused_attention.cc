// The fused bf16 training attention (kernels/cuda/fused_attention_cuda.h) against the CPU's exact
// f32 attention on the same inputs: outputs and every gradient, with the masks, attention dropout
// (the CPU's keep mask) and several tiles; where ops::attention must not take it; and one bf16
// training update of a model whose heads it takes, on both devices. On the CPU, bf16 attention is
// the f32 path bit for bit (the CPU has no fused kernels).
//
// Tolerance: bf16 operands carry a relative rounding of 2^-9 in each of the two products (scores,
// then weights times values; dP and dS likewise in the backward), so results differ from the exact
// f32 ones by a few times 2^-9 in relative norm: 1e-2, as the bf16 products of the other ops. A
// wrong mask, tile or fragment gives errors of order 1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/nn/batch.h"
#include "tfm/ops/ops.h"
#include "tfm/train/session.h"

namespace tfm::internal {
namespace {

using testing::expect_matches_cpu;
using testing::relative_error;
using testing::uniform_tensor;

constexpr double kBf16Tolerance = 1e-2;
constexpr double kExactTolerance = 5e-5;  // the exact path: f32 sums in another order

struct Case {
  int64_t batch = 2, tq = 7, tk = 13;
  int heads = 2;
  int64_t d = 64;  // dk = dv
  ops::AttentionMask mask;
  float dropout = 0.0f;
  uint64_t seed = 0;
};

struct Result {
  Tensor out, dq, dk, dv;
};

struct Inputs {
  Tensor q, k, v, d_out;
};

Inputs inputs_for(const Case& c, uint32_t seed) {
  return {uniform_tensor({c.batch, c.tq, c.heads * c.d}, seed),
          uniform_tensor({c.batch, c.tk, c.heads * c.d}, seed + 1),
          uniform_tensor({c.batch, c.tk, c.heads * c.d}, seed + 2),
          uniform_tensor({c.batch, c.tq, c.heads * c.d}, seed + 3)};
}

Tensor leaf(const Tensor& x, Device device) {
  Tensor t = device == Device::cpu ? x.clone() : x.to(device);
  t.set_requires_grad(true);
  return t;
}

Result run(const Case& c, const Inputs& in, Device device, DType precision) {
  Tensor q = leaf(in.q, device), k = leaf(in.k, device), v = leaf(in.v, device);
  Result r;
  Tape tape;
  {
    TapeScope scope(tape);
    r.out = ops::attention(q, k, v, c.heads, c.mask, c.dropout, c.seed, nullptr, precision);
  }
  tape.backward(r.out, in.d_out.to(device));
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  return r;
}

void expect_all_match(const Result& cpu, const Result& other, double tolerance,
                      const std::string& what) {
  expect_matches_cpu(cpu.out, other.out, tolerance, what + ": out");
  expect_matches_cpu(cpu.dq, other.dq, tolerance, what + ": dq");
  expect_matches_cpu(cpu.dk, other.dk, tolerance, what + ": dk");
  expect_matches_cpu(cpu.dv, other.dv, tolerance, what + ": dv");
}

// The GPU's bf16 attention against the CPU's f32 one; and, so that the case shows the fused
// kernels ran, not the exact path, the GPU's bf16 results differ from its f32 ones.
void check_fused(const Case& c, uint32_t seed, const std::string& what) {
  const Inputs in = inputs_for(c, seed);
  const Result cpu = run(c, in, Device::cpu, DType::f32);
  const Result fused = run(c, in, Device::cuda, DType::bf16);
  expect_all_match(cpu, fused, kBf16Tolerance, what);
  const Result exact = run(c, in, Device::cuda, DType::f32);
  EXPECT_GT(relative_error(exact.out, fused.out), 1e-5) << what << ": bf16 rounding not seen";
  EXPECT_GT(relative_error(exact.dq, fused.dq), 1e-5) << what << ": bf16 rounding not seen";
}

TEST(CudaFusedAttention, HeadWidth64WithKeyPaddingOverSeveralTiles) {
  TFM_REQUIRE_CUDA();
  Case c;
  c.batch = 3;
  c.tq = 37;
  c.tk = 70;
  c.heads = 8;
  c.mask.key_lengths = {70, 33, 1};
  check_fused(c, 40, "37 x 70, key lengths");
  c.tq = c.tk = 130;  // three tiles of queries and of keys
  c.mask.key_lengths = {130, 65, 64};
  check_fused(c, 45, "130 x 130, key lengths");
}

TEST(CudaFusedAttention, CausalWithDropout) {
  TFM_REQUIRE_CUDA();
  Case c;
  c.batch = 3;
  c.tq = c.tk = 100;
  c.heads = 8;
  c.mask.key_lengths = {100, 57, 1};
  c.mask.causal = true;
  c.dropout = 0.1f;
  c.seed = 77;
  check_fused(c, 310, "100 x 100, causal, key lengths, dropout 0.1");
  c.batch = 2;
  c.tq = c.tk = 50;
  c.heads = 4;
  c.mask.key_lengths = {};
  c.dropout = 0.5f;
  c.seed = 99;
  check_fused(c, 130, "50 x 50, causal, dropout 0.5");
}

TEST(CudaFusedAttention, CausalWithQueryOffset) {
  TFM_REQUIRE_CUDA();
  Case c;
  c.tq = 3;
  c.tk = 40;
  c.mask.causal = true;
  c.mask.query_offset = 37;
  check_fused(c, 100, "causal, offset 37");
  c.tq = 20;
  c.tk = 70;
  c.mask.query_offset = 50;
  c.mask.key_lengths = {70, 60};
  check_fused(c, 110, "causal, offset 50, key lengths");
}

TEST(CudaFusedAttention, HeadWidths16And32) {
  TFM_REQUIRE_CUDA();
  Case c;
  c.d = 32;
  c.heads = 4;
  c.tq = c.tk = 65;
  c.mask.causal = true;
  check_fused(c, 200, "d 32, causal");
  c.d = 16;
  c.heads = 2;
  c.tq = 7;
  c.tk = 13;
  c.mask = {};
  c.mask.key_lengths = {13, 4};
  check_fused(c, 210, "d 16, key lengths");
}

// Head widths the kernels do not take, wanted probabilities, inference and shared inputs keep the
// exact path: f32 results within the f32 tolerance of the CPU's.
TEST(CudaFusedAttention, ExactPathWhereTheFusedOneDoesNotApply) {
  TFM_REQUIRE_CUDA();
  Case c;
  c.tq = 33;
  c.tk = 65;
  c.d = 128;
  Inputs in = inputs_for(c, 50);
  expect_all_match(run(c, in, Device::cpu, DType::f32), run(c, in, Device::cuda, DType::bf16),
                   kExactTolerance, "d 128");

  c.d = 64;
  in = inputs_for(c, 60);
  const Tensor expected = ops::attention(in.q, in.k, in.v, c.heads, c.mask);
  const Tensor no_tape =
      ops::attention(in.q.to(Device::cuda), in.k.to(Device::cuda), in.v.to(Device::cuda), c.heads,
                     c.mask, 0.0f, 0, nullptr, DType::bf16);
  expect_matches_cpu(expected, no_tape, 1e-5, "inference");
  Tensor q = leaf(in.q, Device::cuda), probs;
  Tape tape;
  Tensor out;
  {
    TapeScope scope(tape);
    out = ops::attention(q, in.k.to(Device::cuda), in.v.to(Device::cuda), c.heads, c.mask, 0.0f, 0,
                         &probs, DType::bf16);
  }
  expect_matches_cpu(expected, out, 1e-5, "with probabilities");
  EXPECT_TRUE(probs.defined());

  Tensor x = leaf(in.q, Device::cuda), x_cpu = leaf(in.q, Device::cpu);
  Tensor shared[2];
  Tensor grads[2];
  for (int i = 0; i < 2; ++i) {
    Tensor& input = i == 0 ? x_cpu : x;
    Tape t;
    {
      TapeScope scope(t);
      shared[i] = ops::attention(input, input, input, c.heads, c.mask, 0.0f, 0, nullptr,
                                 i == 0 ? DType::f32 : DType::bf16);
    }
    t.backward(shared[i], in.d_out.to(input.device()));
    grads[i] = input.grad();
  }
  expect_matches_cpu(shared[0], shared[1], 1e-5, "q = k = v: out");
  expect_matches_cpu(grads[0], grads[1], kExactTolerance, "q = k = v: dx");
}

// One bf16 update of a model with heads of 32 (d_model 64, 2 heads) on each device from the same
// weights: the same loss and gradient norm within the bf16 tolerance.
TEST(CudaFusedAttention, Bf16TrainingUpdateMatchesTheCpus) {
  TFM_REQUIRE_CUDA();
  ModelConfig config;
  config.layers = 2;
  config.d_model = 64;
  config.d_ff = 128;
  config.heads = 2;
  config.d_k = config.d_v = 32;
  config.vocab_size = 50;
  config.max_positions = 64;
  config.dropout = 0.1;
  std::vector<int32_t> src(4 * 20), tgt_in(4 * 17), tgt_out(4 * 17);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<int32_t>(3 + (i * 7) % 47);
  for (size_t i = 0; i < tgt_in.size(); ++i) {
    tgt_in[i] = static_cast<int32_t>(3 + (i * 11) % 47);
    tgt_out[i] = static_cast<int32_t>(3 + (i * 13) % 47);
  }
  const nn::Batch batch =
      nn::Batch::from_ids(Tensor::from_ints({4, 20}, src), Tensor::from_ints({4, 17}, tgt_in),
                          Tensor::from_ints({4, 17}, tgt_out), config.pad_id);
  UpdateResult results[2];
  for (Device device : {Device::cpu, Device::cuda}) {
    SessionOptions options;
    options.seed = 5;
    options.device = device;
    options.precision = DType::bf16;
    TrainingSession session(config, options);
    results[device == Device::cpu ? 0 : 1] = session.update({batch});
  }
  EXPECT_FALSE(results[1].skipped);
  EXPECT_NEAR(results[1].loss, results[0].loss, kBf16Tolerance * results[0].loss);
  EXPECT_NEAR(results[1].grad_norm, results[0].grad_norm, kBf16Tolerance * results[0].grad_norm);
}

// On the CPU (no fused kernels) bf16 attention is the f32 path: the same bits.
TEST(FusedAttention, CpuBf16AttentionIsTheF32Path) {
  Case c;
  c.tq = 9;
  c.tk = 11;
  c.d = 32;
  c.mask.causal = true;
  c.dropout = 0.2f;
  c.seed = 3;
  const Inputs in = inputs_for(c, 70);
  const Result f32 = run(c, in, Device::cpu, DType::f32);
  const Result bf16 = run(c, in, Device::cpu, DType::bf16);
  double norm = 0;
  for (float x : f32.dq.to_floats()) norm += static_cast<double>(x) * x;
  EXPECT_GT(norm, 0.0);
  EXPECT_EQ(f32.out.to_floats(), bf16.out.to_floats());
  EXPECT_EQ(f32.dq.to_floats(), bf16.dq.to_floats());
  EXPECT_EQ(f32.dk.to_floats(), bf16.dk.to_floats());
  EXPECT_EQ(f32.dv.to_floats(), bf16.dv.to_floats());
}

}  // namespace
}  // namespace tfm::internal
