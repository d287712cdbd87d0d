// The machine's measured GEMM ceiling: f32 GFLOP/s of the products of a Transformer-base training
// step (4096 tokens per batch, d_model 512, d_ff 2048, 37000-token vocabulary, 8 heads of 64)
// through cpu::gemm as the ops call it (oneDNN's matmul, or our blocked kernel for the large f32
// products it takes: training_product_f32 compares the two), on 2 threads; f32 operands, and bf16
// operands with an f32 result (the mixed-precision path). bench/suite.sh reads its JSON output
// (--benchmark_format=json) and prints each product as a fraction of the run's best rate.
//
// peak_*: the rate of the multiply-add instructions alone, on every thread, each running
// independent accumulator chains (enough of them to hide the instruction's latency) of one
// instruction and nothing else: the hardware's limit for that element type, which no product can
// pass. AVX-512 FMA for f32, vdpbf16ps (AVX512-BF16) for bf16, vpdpbusd (AVX512-VNNI) for int8. On
// a CPU with AMX, oneDNN multiplies bf16 and int8 with its tile products instead, and passes these
// rates.
//
//   ./build/rel/gemm_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "tfm/core/tensor.h"
#include "tfm/core/threading.h"
#include "tfm/kernels/cpu/attention_cpu.h"
#include "tfm/kernels/cpu/blocked_gemm_cpu.h"
#include "tfm/kernels/cpu/cross_entropy_cpu.h"
#include "tfm/kernels/cpu/elementwise_cpu.h"
#include "tfm/kernels/cpu/matmul_cpu.h"
#include "tfm/kernels/cpu/packed_matmul_cpu.h"
#include "tfm/kernels/cpu/panel_int8_cpu.h"
#include "tfm/kernels/cpu/panel_matmul_cpu.h"
#include "tfm/kernels/cpu/top_k_cpu.h"
#include "tfm/kernels/cpu/vector_math.h"

namespace {

using tfm::internal::DType;
using tfm::internal::Tensor;
using tfm::internal::cpu::GemmArgs;
using tfm::internal::cpu::GemmOperand;

constexpr int kThreads = 2;

Tensor random_tensor(const tfm::internal::Shape& shape, unsigned seed, DType dtype = DType::f32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t = Tensor::empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::bf16) {
      t.data<tfm::internal::bf16>()[i] = tfm::internal::float_to_bf16(dist(rng));
    } else {
      t.data<float>()[i] = dist(rng);
    }
  }
  return t;
}

void run(benchmark::State& state, const GemmArgs& args, double flops) {
  tfm::internal::cpu::gemm(args);  // creates and caches the primitive outside the timed loop
  for (auto _ : state) tfm::internal::cpu::gemm(args);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// y [M, N] = x [M, K] W^T with W [N, K]: the layout of ops::linear's forward.
void linear_forward(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor x = random_tensor({m, k}, 1), w = random_tensor({n, k}, 2), y = Tensor::empty({m, n});
  GemmArgs args;
  args.a = GemmOperand::dense(x.raw(), DType::f32, {m, k});
  args.b = GemmOperand::dense(w.raw(), DType::f32, {n, k}).transposed();
  args.c = GemmOperand::dense(y.raw(), DType::f32, {m, n});
  run(state, args, 2.0 * m * k * n);
}

// dW [N, K] += g^T x with g [M, N], x [M, K]: ops::linear's weight gradient (transposed a, sum).
void linear_weight_grad(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor g = random_tensor({m, n}, 3), x = random_tensor({m, k}, 4), dw = random_tensor({n, k}, 5);
  GemmArgs args;
  args.a = GemmOperand::dense(g.raw(), DType::f32, {m, n}).transposed();
  args.b = GemmOperand::dense(x.raw(), DType::f32, {m, k});
  args.c = GemmOperand::dense(dw.raw(), DType::f32, {n, k});
  args.accumulate = true;
  run(state, args, 2.0 * m * k * n);
}

// Attention products per (batch, head) on strided head views of [B, T, h*d] projections.
constexpr int64_t kBatch = 128, kHeads = 8, kT = 32, kHeadDim = 64;

GemmOperand head_view(const Tensor& t) {
  return GemmOperand::strided(t.raw(), DType::f32, {kBatch, kHeads, kT, kHeadDim},
                              {kT * kHeads * kHeadDim, kHeadDim, kHeads * kHeadDim, 1});
}

// S [B, h, T, T] = q k^T / sqrt(d).
void attention_scores(benchmark::State& state) {
  Tensor q = random_tensor({kBatch, kT, kHeads * kHeadDim}, 6);
  Tensor k = random_tensor({kBatch, kT, kHeads * kHeadDim}, 7);
  Tensor s = Tensor::empty({kBatch, kHeads, kT, kT});
  GemmArgs args;
  args.a = head_view(q);
  args.b = head_view(k).transposed();
  args.c = GemmOperand::dense(s.raw(), DType::f32, {kBatch, kHeads, kT, kT});
  args.alpha = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  run(state, args, 2.0 * kBatch * kHeads * kT * kT * kHeadDim);
}

// O [B, T, h*d] = P v, written into the heads-concatenated layout.
void attention_values(benchmark::State& state) {
  Tensor p = random_tensor({kBatch, kHeads, kT, kT}, 8);
  Tensor v = random_tensor({kBatch, kT, kHeads * kHeadDim}, 9);
  Tensor o = Tensor::empty({kBatch, kT, kHeads * kHeadDim});
  GemmArgs args;
  args.a = GemmOperand::dense(p.raw(), DType::f32, {kBatch, kHeads, kT, kT});
  args.b = head_view(v);
  args.c = head_view(o);
  run(state, args, 2.0 * kBatch * kHeads * kT * kT * kHeadDim);
}

// A training step's attention, forward and backward (cpu::attention_forward and
// attention_backward, as ops::attention calls them), without masks or dropout: batch, tokens, heads
// and head width from the arguments, and the MiB written between iterations. Counts the six
// products' flops, 2 * B * h * T * T * d each.
void attention_train(benchmark::State& state) {
  namespace cpu = tfm::internal::cpu;
  const int64_t batch = state.range(0), t = state.range(1), heads = state.range(2),
                d = state.range(3);
  Tensor q = random_tensor({batch, t, heads * d}, 10), k = random_tensor(q.shape(), 11),
         v = random_tensor(q.shape(), 12), d_out = random_tensor(q.shape(), 13);
  Tensor out = Tensor::empty(q.shape()), dq = Tensor::empty(q.shape()),
         dk = Tensor::empty(q.shape()), dv = Tensor::empty(q.shape());
  Tensor probs = Tensor::empty({batch, heads, t, t}), d_probs = Tensor::empty(probs.shape());
  cpu::AttentionDims dims;
  dims.batch = batch;
  dims.heads = heads;
  dims.tq = dims.tk = t;
  dims.dk = dims.dv = d;
  cpu::AttentionMaskSpec mask;
  cpu::AttentionDropout dropout;
  cpu::AttentionGrads targets;
  targets.dq = dq.data<float>();
  targets.dk = dk.data<float>();
  targets.dv = dv.data<float>();
  std::vector<float> flush(static_cast<size_t>(state.range(4)) << 18);  // 2^18 floats a MiB
  for (auto _ : state) {
    if (!flush.empty()) {
      state.PauseTiming();
      for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.0f;
      state.ResumeTiming();
    }
    cpu::attention_forward(dims, mask, dropout, q.data<float>(), k.data<float>(), v.data<float>(),
                           probs.data<float>(), nullptr, out.data<float>());
    cpu::attention_backward(dims, mask, dropout, q.data<float>(), k.data<float>(), v.data<float>(),
                            probs.data<float>(), d_out.data<float>(), d_probs.data<float>(),
                            targets);
  }
  state.counters["FLOP/s"] = benchmark::Counter(6.0 * 2 * batch * heads * t * t * d,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// The same products with bf16 operands and an f32 result: the mixed-precision path.
void linear_forward_bf16(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor x = random_tensor({m, k}, 1, DType::bf16), w = random_tensor({n, k}, 2, DType::bf16);
  Tensor y = Tensor::empty({m, n});
  GemmArgs args;
  args.a = GemmOperand::dense(x.raw(), DType::bf16, {m, k});
  args.b = GemmOperand::dense(w.raw(), DType::bf16, {n, k}).transposed();
  args.c = GemmOperand::dense(y.raw(), DType::f32, {m, n});
  run(state, args, 2.0 * m * k * n);
}

void linear_weight_grad_bf16(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor g = random_tensor({m, n}, 3, DType::bf16), x = random_tensor({m, k}, 4, DType::bf16);
  Tensor dw = random_tensor({n, k}, 5);
  GemmArgs args;
  args.a = GemmOperand::dense(g.raw(), DType::bf16, {m, n}).transposed();
  args.b = GemmOperand::dense(x.raw(), DType::bf16, {m, k});
  args.c = GemmOperand::dense(dw.raw(), DType::f32, {n, k});
  args.accumulate = true;
  run(state, args, 2.0 * m * k * n);
}

BENCHMARK(linear_forward_bf16)
    ->ArgNames({"M", "K", "N"})
    ->Args({4096, 512, 512})
    ->Args({4096, 512, 2048})
    ->Args({4096, 2048, 512})
    ->Args({4096, 512, 37000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(linear_weight_grad_bf16)
    ->ArgNames({"M", "K", "N"})
    ->Args({4096, 512, 512})
    ->Args({4096, 512, 37000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(linear_forward)
    ->ArgNames({"M", "K", "N"})
    ->Args({4096, 512, 512})
    ->Args({4096, 512, 2048})
    ->Args({4096, 2048, 512})
    ->Args({4096, 512, 37000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(linear_weight_grad)
    ->ArgNames({"M", "K", "N"})
    ->Args({4096, 512, 512})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(attention_scores)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(attention_values)->Unit(benchmark::kMillisecond)->UseRealTime();

// The rest of the pairs, so that every product has an f32 and a bf16 row (bench/suite.sh puts them
// side by side): the weight gradient of the vocabulary projection in f32, and the attention
// products with bf16 operands (f32 scores and outputs, as autocast would give them).
GemmOperand head_view_of(const Tensor& t) {
  return GemmOperand::strided(t.raw(), t.dtype(), {kBatch, kHeads, kT, kHeadDim},
                              {kT * kHeads * kHeadDim, kHeadDim, kHeads * kHeadDim, 1});
}

void attention_scores_bf16(benchmark::State& state) {
  Tensor q = random_tensor({kBatch, kT, kHeads * kHeadDim}, 6, DType::bf16);
  Tensor k = random_tensor({kBatch, kT, kHeads * kHeadDim}, 7, DType::bf16);
  Tensor s = Tensor::empty({kBatch, kHeads, kT, kT});
  GemmArgs args;
  args.a = head_view_of(q);
  args.b = head_view_of(k).transposed();
  args.c = GemmOperand::dense(s.raw(), DType::f32, {kBatch, kHeads, kT, kT});
  args.alpha = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  run(state, args, 2.0 * kBatch * kHeads * kT * kT * kHeadDim);
}

void attention_values_bf16(benchmark::State& state) {
  Tensor p = random_tensor({kBatch, kHeads, kT, kT}, 8, DType::bf16);
  Tensor v = random_tensor({kBatch, kT, kHeads * kHeadDim}, 9, DType::bf16);
  Tensor o = Tensor::empty({kBatch, kT, kHeads * kHeadDim});
  GemmArgs args;
  args.a = GemmOperand::dense(p.raw(), DType::bf16, {kBatch, kHeads, kT, kT});
  args.b = head_view_of(v);
  args.c = head_view_of(o);
  run(state, args, 2.0 * kBatch * kHeads * kT * kT * kHeadDim);
}

BENCHMARK(linear_weight_grad)
    ->ArgNames({"M", "K", "N"})
    ->Args({4096, 512, 37000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// The Multi30k recipe's tiles (64 sentences of 16 tokens, 4 heads of 32), its d_model 256 model's
// as the training benchmarks run it (128 sentences, 4 heads of 64) and `base`'s (8 heads of 64, 32
// tokens). flushMB > 0 writes that many MiB of other memory before each iteration (untimed), so
// that the tiles read their inputs from memory, as in a training step, where products have moved
// other data through the cache since the inputs were written.
BENCHMARK(attention_train)
    ->ArgNames({"B", "T", "heads", "d", "flushMB"})
    ->Args({64, 16, 4, 32, 0})
    ->Args({128, 16, 4, 64, 0})
    ->Args({128, 16, 4, 64, 64})
    ->Args({128, 32, 8, 64, 0})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
// The output layer's loss and gradient over a chunk of logits as a bf16 training step computes
// them (cpu::cross_entropy_rows_with_grad with the gradient's bf16 copy): the Multi30k recipe's
// 2048 rows x 8000 pieces and base's 4096 x 37000. The logits are written again before each call
// (untimed), as the product writes them in the step; GB/s counts the f32 logits read once.
void loss_rows_with_grad_bf16(benchmark::State& state) {
  const int64_t rows = state.range(0), vocab = state.range(1);
  const Tensor source = random_tensor({rows, vocab}, 1);
  Tensor logits = source.clone(), stats = Tensor::empty({rows, 2});
  Tensor grad = Tensor::empty({rows, vocab}, DType::bf16);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    targets[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7919) % vocab);
  for (auto _ : state) {
    state.PauseTiming();
    std::copy_n(source.data<float>(), source.numel(), logits.data<float>());
    state.ResumeTiming();
    tfm::internal::cpu::cross_entropy_rows_with_grad(
        logits.data<float>(), targets.data(), rows, vocab, 0.1f, -1,
        1.0f / static_cast<float>(rows), stats.data<float>(), grad.data<tfm::internal::bf16>());
  }
  state.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(rows * vocab),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(loss_rows_with_grad_bf16)
    ->ArgNames({"rows", "vocab"})
    ->Args({2048, 8000})
    ->Args({4096, 37000})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// The feed-forward's ReLU backward as a bf16 training step runs it (cpu::relu_backward_bias_bf16):
// the masked gradient's bf16 copy and the bias's gradient in one pass over the Multi30k d_model 256
// model's hidden layer, 2048 tokens x 1024. GB/s counts what it must move: y and g read in f32, the
// copy written in bf16.
void relu_backward_bias_bf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  // sets > 1: the calls take turns over that many copies of their operands, so that each reads
  // them from memory (4 x 20 MB against a 32 MB L3), as in a step.
  const int64_t sets = state.range(2);
  std::vector<Tensor> y, g, copy;
  for (int64_t s = 0; s < sets; ++s) {
    y.push_back(random_tensor({rows, cols}, 1));
    g.push_back(random_tensor({rows, cols}, 2));
    copy.push_back(Tensor::empty({rows, cols}, DType::bf16));
  }
  Tensor db = Tensor::empty({cols});
  int64_t turn = 0;
  for (auto _ : state) {
    const size_t s = static_cast<size_t>(turn++ % sets);
    tfm::internal::cpu::relu_backward_bias_bf16(y[s].data<float>(), g[s].data<float>(), rows, cols,
                                                copy[s].data<tfm::internal::bf16>(),
                                                db.data<float>(), false);
  }
  state.counters["GB/s"] = benchmark::Counter(10.0 * static_cast<double>(rows * cols),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(relu_backward_bias_bf16)
    ->ArgNames({"rows", "cols", "sets"})
    ->Args({2048, 1024, 1})
    ->Args({2048, 1024, 4})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(attention_scores_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(attention_values_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- the instructions' peak ----

constexpr int64_t kPeakIterations = 1 << 16;

// Runs chain(kPeakIterations) on every thread per benchmark iteration, each loop iteration of a
// chain doing ops_per_iteration operations (a multiply-add counts two).
template <typename Chain>
void peak(benchmark::State& state, double ops_per_iteration, Chain chain) {
  for (auto _ : state) {
#pragma omp parallel num_threads(kThreads)
    chain(kPeakIterations);
  }
  state.counters["FLOP/s"] = benchmark::Counter(ops_per_iteration * kPeakIterations * kThreads,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

#ifdef __AVX512F__
constexpr int kChains = 12;  // latency 4 x 2 units, with room

// Twelve named accumulators (an array may live in memory), each step(a) depending on the last;
// start(k) gives chain k a value of its own (identical chains would be computed once).
template <typename Start, typename Step>
__attribute__((always_inline)) inline void run_chains(int64_t iterations, Start start, Step step) {
  auto a0 = start(0), a1 = start(1), a2 = start(2), a3 = start(3), a4 = start(4), a5 = start(5),
       a6 = start(6), a7 = start(7), a8 = start(8), a9 = start(9), a10 = start(10), a11 = start(11);
  for (int64_t i = 0; i < iterations; ++i) {
    a0 = step(a0), a1 = step(a1), a2 = step(a2), a3 = step(a3), a4 = step(a4), a5 = step(a5);
    a6 = step(a6), a7 = step(a7), a8 = step(a8), a9 = step(a9), a10 = step(a10), a11 = step(a11);
  }
  for (auto* a : {&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7, &a8, &a9, &a10, &a11})
    benchmark::DoNotOptimize(*a);
}

void peak_fma(benchmark::State& state) {  // 16 lanes x (multiply + add)
  peak(state, 2.0 * 16 * kChains, [](int64_t n) {
    const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
    run_chains(
        n, [](int k) { return _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(k)); },
        [&](__m512 x) { return _mm512_fmadd_ps(x, a, b); });
  });
}
BENCHMARK(peak_fma)->UseRealTime();

// Decoding's products, y [M, N] = x [M, K] W^T + bias with W packed once (cpu::PackedWeight, f32):
// oneDNN's matmul (kernel 0) against our panel kernel (kernel 1, panel_matmul_cpu.h) on the same
// packed weight, for the rows of a decoding step (32 sentences greedy, x4 for beam 4) and of an
// encoder batch (800). GB/s counts the weight's bytes, read once per product.
void packed_linear_f32(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool panels = state.range(3) == 1;
  if (panels && !tfm::internal::cpu::panel_kernel_available()) {
    state.SkipWithError("this build has no panel kernel (no AVX-512)");
    return;
  }
  Tensor x = random_tensor({m, k}, 1), w = random_tensor({n, k}, 2), bias = random_tensor({n}, 3);
  Tensor y = Tensor::empty({m, n});
  const tfm::internal::cpu::PackedWeight packed(w.data<float>(), n, k, DType::f32);
  auto product = [&] {
    if (panels)
      tfm::internal::cpu::panel_linear_f32(
          x.data<float>(), m, n, k, static_cast<const float*>(packed.data()), bias.data<float>(),
          tfm::internal::kernels::PostOp::none, y.data<float>());
    else
      tfm::internal::cpu::packed_linear_onednn(x.data<float>(), m, packed, bias.data<float>(),
                                               y.data<float>());
  };
  product();
  for (auto _ : state) product();
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(n * k) / 1e9 * 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(packed_linear_f32)
    ->ArgsProduct({{1, 2, 4, 8, 16, 32, 128, 800}, {512}, {512, 2048}, {0, 1}})
    ->Args({32, 2048, 512, 0})
    ->Args({32, 2048, 512, 1})
    ->Args({128, 2048, 512, 0})
    ->Args({128, 2048, 512, 1})
    ->Args({800, 2048, 512, 0})
    ->Args({800, 2048, 512, 1})
    ->UseRealTime();

// The weights of `layers` decoder layers of `base`, 8 a layer in the order a step multiplies them
// (self-attention q, k, v and out, cross-attention q and out: 512 x 512; the feed-forward 512 x
// 2048 and 2048 x 512), random: weight(w) for each f32 W [n, k]. Returns the products' FLOP for m
// rows.
template <typename Weight>
double decoder_weights(int64_t layers, int64_t m, Weight weight) {
  constexpr int64_t d = 512, ff = 2048;
  double flops = 0;
  for (int64_t layer = 0; layer < layers; ++layer)
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t n = i == 6 ? ff : d, k = i == 7 ? ff : d;
      weight(random_tensor({n, k}, static_cast<unsigned>(10 * layer + i)));
      flops += 2.0 * static_cast<double>(m * n * k);
    }
  return flops;
}

// The products of one greedy decoding step of `base` as the decoder runs them: 6 layers of 8
// products (self-attention q, k, v and out, cross-attention q and out: 512 x 512; the feed-forward
// 512 x 2048 and 2048 x 512), each with its own packed weight (88 MB in all, more than the caches),
// one after the other on the rows of 32 sentences. packed_linear_f32 multiplies one cache-hot
// weight again and again; this shows the rate of the same products when their weights stream in
// from memory, as they do in decoding (the output layer's: output_blocks_f32).
// written: before each product both threads write x, half of its rows each, as the decoder's own
// ops (layer norm, attention) leave it, so that each thread finds the other's half in the other
// core's cache; the counters give each kind of product's own rate (n x k: 512 x 512, the
// feed-forward's 2048 x 512 and 512 x 2048), the writing not counted.
void decoder_step(benchmark::State& state, bool written) {
  const int64_t m = state.range(0), ff = 2048, layers = state.range(2);
  const bool panels = state.range(1) == 1;
  if (panels && !tfm::internal::cpu::panel_kernel_available()) {
    state.SkipWithError("this build has no panel kernel (no AVX-512)");
    return;
  }
  struct Product {
    std::unique_ptr<tfm::internal::cpu::PackedWeight> weight;
    Tensor bias;
  };
  std::vector<Product> products;
  const double flops = decoder_weights(layers, m, [&](const Tensor& w) {
    const int64_t n = w.dim(0), k = w.dim(1);
    products.push_back(
        {std::make_unique<tfm::internal::cpu::PackedWeight>(w.data<float>(), n, k, DType::f32),
         random_tensor({n}, 3)});
  });
  Tensor x = random_tensor({m, ff}, 1), y = Tensor::empty({m, ff});
  // Seconds and FLOP per kind: 0 n = k = 512, 1 n = 2048, 2 k = 2048.
  double kind_seconds[3] = {0, 0, 0}, kind_flops[3] = {0, 0, 0};
  auto multiply = [&](const Product& p) {
    const tfm::internal::cpu::PackedWeight& w = *p.weight;
    if (panels)
      tfm::internal::cpu::panel_linear_f32(x.data<float>(), m, w.out_features(), w.in_features(),
                                           static_cast<const float*>(w.data()),
                                           p.bias.data<float>(),
                                           tfm::internal::kernels::PostOp::none, y.data<float>());
    else
      tfm::internal::cpu::packed_linear_onednn(x.data<float>(), m, w, p.bias.data<float>(),
                                               y.data<float>());
  };
  auto step = [&](bool timed) {
    for (const Product& p : products) {
      if (written) {
        if (timed) state.PauseTiming();
        // The rows of x the product reads ([m, k], k apart), half written by each thread.
        const int64_t k = p.weight->in_features();
        float* rows = x.data<float>();
#pragma omp parallel for schedule(static) num_threads(kThreads)
        for (int64_t r = 0; r < m; ++r)
          for (int64_t c = 0; c < k; ++c) rows[r * k + c] += 0.0f;  // a real store
        if (timed) state.ResumeTiming();
      }
      const auto start = std::chrono::steady_clock::now();
      multiply(p);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int kind = p.weight->out_features() > 512 ? 1 : p.weight->in_features() > 512 ? 2 : 0;
      kind_seconds[kind] += seconds;
      kind_flops[kind] +=
          2.0 * static_cast<double>(m * p.weight->out_features() * p.weight->in_features());
    }
  };
  step(false);
  std::fill(kind_seconds, kind_seconds + 3, 0.0);
  std::fill(kind_flops, kind_flops + 3, 0.0);
  for (auto _ : state) step(true);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  const char* names[3] = {"n512k512", "n2048k512", "n512k2048"};
  for (int kind = 0; kind < 3; ++kind)
    state.counters[names[kind]] = benchmark::Counter(kind_flops[kind] / kind_seconds[kind] / 1e9);
}

void decoder_step_f32(benchmark::State& state) {
  decoder_step(state, false);
}
BENCHMARK(decoder_step_f32)
    ->ArgNames({"M", "kernel", "layers"})
    ->ArgsProduct({{1, 4, 8, 16, 32, 64, 128, 256}, {0, 1}, {1, 12}})
    ->UseRealTime();

void decoder_step_f32_written(benchmark::State& state) {
  decoder_step(state, true);
}
BENCHMARK(decoder_step_f32_written)
    ->ArgNames({"M", "kernel", "layers"})
    ->ArgsProduct({{32, 64, 96, 128}, {0, 1}, {12}})
    ->UseRealTime();

// A training step's products through cpu::gemm with oneDNN's matmul (kernel 0) against our blocked
// kernel (1, blocked_gemm_cpu.h; with bf16 operands 1 is the vdpbf16ps kernel and 2 the one that
// widens them to f32 for the FMA), in the step's three layouts (0: the forward y = x W^T + bias, a
// row-major and b = W^T; 1: the input gradient g W, both row-major; 2: the weight gradient dW +=
// g^T x, a = g^T). M x K x N is the product's own shape: for the weight gradient M and N are the
// weight's dims and K the tokens. With bf16 operands our kernels are called directly (cpu::gemm
// takes the one bf16_products() chooses, never where oneDNN has AMX); ONEDNN_MAX_CPU_ISA=
// AVX512_CORE_BF16 holds oneDNN to vdpbf16ps on such a CPU, as on one without AMX.
void training_product(benchmark::State& state, DType type) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int64_t layout = state.range(3);
  const int64_t kernel = state.range(4);
  const bool ours = kernel >= 1;
  const bool available = type == DType::f32 || kernel == 2
                             ? tfm::internal::cpu::blocked_gemm_available()
                             : tfm::internal::cpu::blocked_gemm_bf16_available();
  if (ours && !available) {
    state.SkipWithError("this build has no blocked kernel for this type");
    return;
  }
  Tensor a =
      random_tensor(layout == 2 ? tfm::internal::Shape{k, m} : tfm::internal::Shape{m, k}, 1, type);
  Tensor b =
      random_tensor(layout == 0 ? tfm::internal::Shape{n, k} : tfm::internal::Shape{k, n}, 2, type);
  Tensor bias = random_tensor({n}, 3), c = random_tensor({m, n}, 4);
  GemmArgs args;
  args.a = layout == 2 ? GemmOperand::dense(a.raw(), type, {k, m}).transposed()
                       : GemmOperand::dense(a.raw(), type, {m, k});
  args.b = layout == 0 ? GemmOperand::dense(b.raw(), type, {n, k}).transposed()
                       : GemmOperand::dense(b.raw(), type, {k, n});
  args.c = GemmOperand::dense(c.raw(), DType::f32, {m, n});
  if (layout == 0) args.bias = bias.data<float>();
  args.accumulate = layout == 2;
  const double flops = 2.0 * static_cast<double>(m * k * n);
  if (ours && type == DType::bf16) {
    auto view = [](const GemmOperand& op) {
      return tfm::internal::cpu::StridedBf16Matrix{static_cast<const tfm::internal::bf16*>(op.data),
                                                   op.strides[0], op.strides[1]};
    };
    auto product = kernel == 2 ? tfm::internal::cpu::blocked_gemm_bf16_widened
                               : tfm::internal::cpu::blocked_gemm_bf16;
    for (auto _ : state)
      product(m, n, k, view(args.a), view(args.b), args.bias, args.accumulate, false,
              c.data<float>(), n);
    state.counters["FLOP/s"] =
        benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
    return;
  }
  const bool was_enabled =
      tfm::internal::cpu::blocked_gemm_enabled();  // TFM_CPU_GEMM=onednn stays in force
  tfm::internal::cpu::set_blocked_gemm_enabled(ours);
  run(state, args, flops);
  tfm::internal::cpu::set_blocked_gemm_enabled(was_enabled);
}

void training_product_f32(benchmark::State& state) {
  training_product(state, DType::f32);
}
void training_product_bf16(benchmark::State& state) {
  training_product(state, DType::bf16);
}
// The base model's shapes at 4096 tokens (d_model 512, d_ff 2048) and the output layer's 512-token
// chunks against the 37000-token vocabulary (as ONEDNN_VERBOSE showed a step's products), in the
// layouts of training_product.
void training_shapes(benchmark::internal::Benchmark* b, const std::vector<int64_t>& kernels) {
  b->ArgNames({"M", "K", "N", "layout", "kernel"})
      ->ArgsProduct({{4096}, {512}, {512, 2048}, {0, 1}, kernels})
      ->ArgsProduct({{4096}, {2048}, {512}, {0, 1}, kernels})
      ->ArgsProduct({{512}, {4096}, {512, 2048}, {2}, kernels})
      ->ArgsProduct({{2048}, {4096}, {512}, {2}, kernels})
      ->ArgsProduct({{512}, {512}, {37000}, {0}, kernels})
      ->ArgsProduct({{512}, {37000}, {512}, {1}, kernels})
      ->ArgsProduct({{37000}, {512}, {512}, {2}, kernels})
      // The Multi30k recipe's model (d_model 256, d_ff 1024, 8000 tokens) at 2048 tokens.
      ->ArgsProduct({{2048}, {256}, {256, 1024}, {0, 1}, kernels})
      ->ArgsProduct({{2048}, {1024}, {256}, {0, 1}, kernels})
      ->ArgsProduct({{256}, {2048}, {256, 1024}, {2}, kernels})
      ->ArgsProduct({{2048}, {256}, {8000}, {0}, kernels})
      ->ArgsProduct({{2048}, {8000}, {256}, {1}, kernels})
      ->ArgsProduct({{8000}, {2048}, {256}, {2}, kernels});
}

BENCHMARK(training_product_f32)
    ->Apply([](benchmark::internal::Benchmark* b) {
      training_shapes(b, {0, 1});
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
// And smaller products, for the widening kernel's threshold (a few hundred tokens a batch).
BENCHMARK(training_product_bf16)
    ->Apply([](benchmark::internal::Benchmark* b) {
      training_shapes(b, {0, 1, 2});
    })
    ->ArgsProduct({{128, 256, 512, 1024}, {256}, {256}, {0, 1}, {0, 2}})
    ->ArgsProduct({{128, 256}, {512}, {512}, {0, 1}, {0, 2}})
    ->ArgsProduct({{256}, {128, 256}, {256}, {2}, {0, 2}})
    // The main job's recipe (configs/multi30k-en-de.yaml: d_model 128, d_ff 256, 8000 tokens) at
    // 1024 tokens, oneDNN against the vdpbf16ps kernel.
    ->ArgsProduct({{1024}, {128}, {128, 256, 8000}, {0, 1}, {0, 1}})
    ->ArgsProduct({{1024}, {256, 8000}, {128}, {0, 1}, {0, 1}})
    ->ArgsProduct({{128, 256, 8000}, {1024}, {128}, {2}, {0, 1}})
    ->ArgsProduct({{128}, {1024}, {256}, {2}, {0, 1}})
    ->ArgsProduct({{128, 256, 8000}, {2048, 4096}, {128}, {2}, {0, 1}})
    ->ArgsProduct({{128}, {2048, 4096}, {256}, {2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The int8 products of few rows: oneDNN's (kernel 0: gemm:jit on a CPU without VNNI, its brgemm
// with VNNI) against our int8 panel kernel (1: vpmaddubsw, or vpdpbusd in a build for VNNI). On a
// CPU with VNNI, PackedWeight makes no panels (oneDNN multiplies there), so the bench packs panels
// of its own (of other s8 values: the speed does not depend on them).
void packed_product_i8(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor w = random_tensor({n, k}, 2);
  const tfm::internal::cpu::PackedWeight packed(w.data<float>(), n, k, DType::i8);
  const bool ours = state.range(3) == 1;
  if (ours && !tfm::internal::cpu::int8_panel_kernel_available()) {
    state.SkipWithError("this build has no int8 panel kernel (no AVX512BW)");
    return;
  }
  std::vector<int8_t> own_panels;
  const int8_t* panels = packed.int8_panels();
  int64_t panel_groups = packed.int8_panel_groups();
  if (ours && panels == nullptr) {
    std::vector<int8_t> q(static_cast<size_t>(n * k));
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<int8_t>(i * 31 % 255 - 127);
    own_panels.resize(static_cast<size_t>(tfm::internal::cpu::int8_panel_bytes(n, k)));
    tfm::internal::cpu::pack_int8_panels(q.data(), n, k, own_panels.data());
    panels = own_panels.data();
    panel_groups = tfm::internal::cpu::int8_panel_groups(k);
  }
  std::vector<uint8_t> u(static_cast<size_t>(m * k));
  for (size_t i = 0; i < u.size(); ++i) u[i] = static_cast<uint8_t>(1 + i * 37 % 127);
  std::vector<int32_t> acc(static_cast<size_t>(m * n));
  auto product = [&] {
    if (ours)
      tfm::internal::cpu::panel_product_u8s8(u.data(), m, n, k, panels, panel_groups, acc.data());
    else
      tfm::internal::cpu::packed_product_u8s8_onednn(u.data(), m, packed, acc.data());
  };
  product();
  for (auto _ : state) product();
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k),
                                                benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(n * k), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(packed_product_i8)
    ->ArgsProduct({{1, 4, 8, 16, 32, 64, 128}, {512}, {512, 2048}, {0, 1}})
    ->Args({1, 2048, 512, 0})
    ->Args({1, 2048, 512, 1})
    ->Args({4, 2048, 512, 0})
    ->Args({4, 2048, 512, 1})
    ->Args({32, 2048, 512, 0})
    ->Args({32, 2048, 512, 1})
    ->Args({128, 2048, 512, 0})
    ->Args({128, 2048, 512, 1})
    ->ArgsProduct({{800, 1600, 3200}, {512}, {512, 2048}, {0, 1}})
    ->Args({800, 2048, 512, 0})
    ->Args({800, 2048, 512, 1})
    ->UseRealTime();

// decoder_step_f32's products with int8 weights, x quantised once (as both paths take it): kernel 0
// oneDNN's s32 product and then dequantize_product (a second pass), 1 our panel kernel with the
// dequantisation in the same pass (panel_int8_cpu.h), reading oneDNN's packed copy where it can
// (with VNNI) or its own. 12 layers' weights (42 MB) stream from memory, as in a decoding step.
// quantise (our kernel only): 0 x quantised once for all the products, 1 quantise_rows_u8 before
// each product (a parallel region of its own), 2 each product quantising x in its own region
// (panel_linear_quantising, as packed_linear does).
void decoder_step_i8(benchmark::State& state) {
  namespace cpu = tfm::internal::cpu;
  const int64_t m = state.range(0), ff = 2048, layers = state.range(2);
  const bool ours = state.range(1) == 1;
  const int64_t quantise = state.range(3);
  if (!ours && quantise != 0) {
    state.SkipWithError("quantise 1 and 2 are our kernel's");
    return;
  }
  const int32_t zero_point = cpu::activation_zero_point();
  if (ours && !cpu::int8_panel_kernel_exact_for(zero_point)) {
    state.SkipWithError("this build's int8 panel kernel is not exact for this CPU's activations");
    return;
  }
  struct Product {
    std::unique_ptr<cpu::PackedWeight> weight;
    Tensor bias;
    std::vector<int8_t> own_panels;  // where the kernel cannot read oneDNN's copy
  };
  std::vector<Product> products;
  const double flops = decoder_weights(layers, m, [&](const Tensor& w) {
    const int64_t n = w.dim(0), k = w.dim(1);
    Product p{std::make_unique<cpu::PackedWeight>(w.data<float>(), n, k, DType::i8),
              random_tensor({n}, 3),
              {}};
    if (ours && p.weight->int8_panels() == nullptr) {
      std::vector<int8_t> q(static_cast<size_t>(n * k));
      std::vector<float> scales(static_cast<size_t>(n));
      cpu::quantize_rows_s8(w.data<float>(), n, k, q.data(), scales.data());
      p.own_panels.resize(static_cast<size_t>(cpu::int8_panel_bytes(n, k)));
      cpu::pack_int8_panels(q.data(), n, k, p.own_panels.data());
    }
    products.push_back(std::move(p));
  });
  Tensor x = random_tensor({m, ff}, 1), y = Tensor::empty({m, ff});
  std::vector<uint8_t> u(static_cast<size_t>(m * ff));
  std::vector<float> x_scales(static_cast<size_t>(m));
  cpu::quantize_rows_u8(x.data<float>(), m, ff, u.data(), x_scales.data(), zero_point);
  auto step = [&] {
    for (const Product& p : products) {
      const cpu::PackedWeight& w = *p.weight;
      const int64_t n = w.out_features(), k = w.in_features();
      if (ours) {
        cpu::Int8Epilogue e;
        e.x_scales = x_scales.data();
        e.w_scales = w.scales();
        e.w_row_sums = w.row_sums();
        e.bias = p.bias.data<float>();
        e.zero_point = zero_point;
        const bool own = !p.own_panels.empty();
        const int8_t* panels = own ? p.own_panels.data() : w.int8_panels();
        const int64_t groups = own ? cpu::int8_panel_groups(k) : w.int8_panel_groups();
        if (quantise == 2) {
          cpu::panel_linear_quantising(x.data<float>(), m, n, k, panels, groups, e, u.data(),
                                       x_scales.data(), y.data<float>());
          continue;
        }
        if (quantise == 1)
          cpu::quantize_rows_u8(x.data<float>(), m, k, u.data(), x_scales.data(), zero_point);
        cpu::panel_linear_u8s8(u.data(), m, n, k, panels, groups, e, y.data<float>());
      } else {
        auto* acc = reinterpret_cast<int32_t*>(y.data<float>());
        cpu::packed_product_u8s8_onednn(u.data(), m, w, acc);
        cpu::dequantize_product(acc, m, n, x_scales.data(), w.scales(), w.row_sums(),
                                p.bias.data<float>(), false, y.data<float>(), zero_point);
      }
    }
  };
  step();
  for (auto _ : state) step();
  state.counters["OP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(decoder_step_i8)
    ->ArgNames({"M", "kernel", "layers", "quantise"})
    ->ArgsProduct({{1, 4, 32, 128}, {0}, {1, 12}, {0}})
    ->ArgsProduct({{1, 4, 32, 128}, {1}, {1, 12}, {0, 1, 2}})
    ->UseRealTime();

// The activations of a decoding step's int8 product quantised per row (quantize_rows_u8, before
// every product): rows x cols f32 in the caches, GB/s of f32 read.
void quantize_activations(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1);
  Tensor x = random_tensor({m, k}, 1);
  std::vector<uint8_t> u(static_cast<size_t>(m * k));
  std::vector<float> scales(static_cast<size_t>(m));
  for (auto _ : state) {
    tfm::internal::cpu::quantize_rows_u8(x.data<float>(), m, k, u.data(), scales.data());
    benchmark::DoNotOptimize(u.data());
  }
  state.counters["B/s"] = benchmark::Counter(static_cast<double>(m * k * 4),
                                             benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(quantize_activations)
    ->ArgNames({"M", "K"})
    ->ArgsProduct({{1, 32, 128}, {512, 2048}})
    ->UseRealTime();

#ifdef __AVX512F__
// sum_j e^{z_j - max} over rows of 1024 logits in L1/L2 (a block of the output layer's fold, and
// the loss's and softmax's exponentials), on one thread: variant 0 with exp16, 1 with
// exp16_at_most_zero (sum_exp's). Elements a second.
void exp_rows(benchmark::State& state) {
  namespace cpu = tfm::internal::cpu;
  const int64_t rows = 32, n = 1024;
  const bool at_most_zero = state.range(0) == 1;
  Tensor z = random_tensor({rows, n}, 1);
  std::vector<float> max(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    max[static_cast<size_t>(r)] = cpu::max_of(z.data<float>() + r * n, n);
  for (auto _ : state) {
    __m512 total = _mm512_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = z.data<float>() + r * n;
      const __m512 shift = _mm512_set1_ps(max[static_cast<size_t>(r)]);
      for (int64_t j = 0; j < n; j += 16) {
        const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(row + j), shift);
        total = _mm512_add_ps(total, at_most_zero ? cpu::exp16_at_most_zero(x) : cpu::exp16(x));
      }
    }
    benchmark::DoNotOptimize(total);
  }
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(rows * n),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(exp_rows)->ArgName("at_most_zero")->Arg(0)->Arg(1);
#endif

// The top-k scan of log_softmax_top's fold (cpu::TopK::scan, m = 8) over a 32000-token row in
// blocks of 1024, in rising order: values 0 random (normal), 1 all equal (an untrained output
// layer's logits). Elements a second.
void top_k_scan(benchmark::State& state) {
  const int64_t n = 32000, block = 1024;
  const int32_t m = 8;
  std::vector<float> row(static_cast<size_t>(n), 0.25f);
  if (state.range(0) == 0) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal;
    for (float& v : row) v = normal(rng);
  }
  std::vector<float> values(m);
  std::vector<int32_t> indices(m);
  for (auto _ : state) {
    tfm::internal::cpu::TopK top{values.data(), indices.data(), m, 0};
    for (int64_t b = 0; b < n; b += block) top.scan(row.data() + b, std::min(block, n - b), b, -1);
    benchmark::DoNotOptimize(top.count);
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(top_k_scan)->ArgName("equal")->Arg(0)->Arg(1);

// The output layer of a decoding step as log_softmax_top runs it: the 32000-token embedding in
// packed blocks of 1024 tokens (64 MB, more than the caches), each thread multiplying its own
// contiguous range of blocks with a one-thread product. rows: 32 greedy / 128 beam-4 sentences.
void output_blocks_f32(benchmark::State& state) {
  const int64_t m = state.range(0), k = 512, vocab = 32000, block = 1024;
  const bool panels = state.range(1) == 1;
  if (panels && !tfm::internal::cpu::panel_kernel_available()) {
    state.SkipWithError("this build has no panel kernel (no AVX-512)");
    return;
  }
  const int64_t blocks = (vocab + block - 1) / block;
  Tensor x = random_tensor({m, k}, 1), w = random_tensor({vocab, k}, 2);
  std::vector<std::unique_ptr<tfm::internal::cpu::PackedWeight>> packed;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n = std::min(block, vocab - b * block);
    packed.push_back(std::make_unique<tfm::internal::cpu::PackedWeight>(
        w.data<float>() + b * block * k, n, k, DType::f32));
  }
  Tensor y = Tensor::empty({kThreads, m, block});
  auto product = [&] {
#pragma omp parallel num_threads(kThreads)
    {
      const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
      float* z = y.data<float>() + thread * m * block;
      for (int64_t b = blocks * thread / threads; b < blocks * (thread + 1) / threads; ++b) {
        const tfm::internal::cpu::PackedWeight& p = *packed[static_cast<size_t>(b)];
        if (panels)
          tfm::internal::cpu::panel_linear_f32(x.data<float>(), m, p.out_features(), k,
                                               static_cast<const float*>(p.data()), nullptr,
                                               tfm::internal::kernels::PostOp::none, z);
        else
          tfm::internal::cpu::packed_linear_onednn(x.data<float>(), m, p, nullptr, z);
      }
    }
  };
  product();
  for (auto _ : state) product();
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * vocab * k),
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(output_blocks_f32)->ArgsProduct({{4, 8, 32, 128}, {0, 1}})->UseRealTime();
#endif

// A beam-4 decoding step's attention over its key/value caches (cpu::attention_forward_cached,
// f32), `base` (8 heads of 64): cross 0 the self-attention, 128 rows (32 sentences x 4 hypotheses)
// each over its own 25 cached positions; cross 1 the cross-attention, 32 sources of 25 positions
// with their 4 hypotheses' queries. `layers` caches are taken in turn, as a step's layers do: 6
// layers' self-attention caches (78 MB) stream from memory, 1 layer's (13 MB) stays in L3. FLOP/s
// counts the two products' multiply-adds (q k^T and P v).
void attention_cached_f32(benchmark::State& state) {
  namespace cpu = tfm::internal::cpu;
  constexpr int64_t kSources = 32, kBeam = 4, kKeys = 25, kHeadsBase = 8, kWidth = 64;
  const bool cross = state.range(0) == 1;
  const int64_t layers = state.range(1);
  cpu::AttentionDims dims;
  dims.batch = cross ? kSources : kSources * kBeam;
  dims.heads = kHeadsBase;
  dims.tq = cross ? kBeam : 1;
  dims.tk = kKeys;
  dims.dk = dims.dv = kWidth;
  const int64_t width = kHeadsBase * kWidth;
  std::vector<Tensor> keys, values;
  for (int64_t layer = 0; layer < layers; ++layer) {
    keys.push_back(
        random_tensor({dims.batch, kKeys, width}, 40 + 2 * static_cast<unsigned>(layer)));
    values.push_back(random_tensor(keys.back().shape(), 41 + 2 * static_cast<unsigned>(layer)));
  }
  Tensor q = random_tensor({dims.batch, dims.tq, width}, 39);
  Tensor probs = Tensor::empty({dims.batch, kHeadsBase, dims.tq, kKeys});
  Tensor out = Tensor::empty(q.shape());
  cpu::AttentionMaskSpec mask;
  int64_t layer = 0;
  for (auto _ : state) {
    cpu::CachedKeyValues kv;
    kv.k = keys[static_cast<size_t>(layer)].raw();
    kv.k_batch_stride = kKeys * width;
    kv.v = values[static_cast<size_t>(layer)].raw();
    kv.v_batch_stride = kKeys * width;
    cpu::attention_forward_cached(dims, mask, q.data<float>(), kv, probs.data<float>(),
                                  out.data<float>());
    layer = (layer + 1) % layers;
  }
  state.counters["FLOP/s"] = benchmark::Counter(
      2.0 * 2.0 * static_cast<double>(dims.batch * dims.tq * kHeadsBase * kKeys * kWidth),
      benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(attention_cached_f32)
    ->ArgNames({"cross", "layers"})
    ->ArgsProduct({{0, 1}, {1, 6}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

#ifdef __AVX512BF16__
void peak_dot_bf16(benchmark::State& state) {  // 32 bf16 products summed into 16 f32 lanes
  peak(state, 2.0 * 32 * kChains, [](int64_t n) {
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    run_chains(
        n, [](int k) { return _mm512_set1_ps(static_cast<float>(k)); },
        [&](__m512 x) { return _mm512_dpbf16_ps(x, a, a); });
  });
}
BENCHMARK(peak_dot_bf16)->UseRealTime();
#endif

#ifdef __AVX512VNNI__
void peak_dot_int8(benchmark::State& state) {  // 64 u8 x s8 products summed into 16 s32 lanes
  peak(state, 2.0 * 64 * kChains, [](int64_t n) {
    const __m512i a = _mm512_set1_epi8(1);
    run_chains(
        n, [](int k) { return _mm512_set1_epi32(k); },
        [&](__m512i x) { return _mm512_dpbusd_epi32(x, a, a); });
  });
}
BENCHMARK(peak_dot_int8)->UseRealTime();
#endif

}  // namespace

int main(int argc, char** argv) {
  tfm::internal::set_num_threads(kThreads);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
