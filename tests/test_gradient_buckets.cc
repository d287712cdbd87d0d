// Gradient buckets (train/gradient_buckets.h): each bucket starts its all-reduce while the backward
// is still running, in order, and only once its gradients are final.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "model_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/ops.h"
#include "tfm/train/gradient_buckets.h"

namespace tfm::internal {
namespace {

// Rank 0 of 2 whose partner adds zeros: records each bucket as it was when its all-reduce started.
class RecordingCommunicator final : public dist::Communicator {
 public:
  struct Start {
    const float* data;
    std::vector<float> values;
  };
  std::vector<Start> starts;
  int waits = 0;

  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "recording"; }
  void all_reduce_sum(std::span<float>) override {}
  void all_reduce_sum(std::span<double>) override {}
  std::vector<uint64_t> all_gather(uint64_t value) override { return {value, value}; }
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  void start_all_reduce_sum(std::span<float> data) override {
    starts.push_back({data.data(), std::vector<float>(data.begin(), data.end())});
  }
  void progress() override {}
  void wait_all() override { ++waits; }
  [[noreturn]] void abort(int) override { std::abort(); }
};

ModelConfig bucket_config() {
  ModelConfig c = testing::small_model_config();
  c.layers = 2;
  c.dropout = 0.0;
  return c;
}

nn::Batch fixed_batch(const ModelConfig& config) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> token(4, static_cast<int32_t>(config.vocab_size) - 1);
  std::vector<int32_t> src(3 * 6), tgt_in(3 * 5), tgt_out(3 * 5);
  for (auto* ids : {&src, &tgt_in, &tgt_out})
    for (int32_t& id : *ids) id = token(rng);
  return nn::Batch::from_ids(Tensor::from_ints({3, 6}, src), Tensor::from_ints({3, 5}, tgt_in),
                             Tensor::from_ints({3, 5}, tgt_out), config.pad_id);
}

// Forward and backward of `model` on `batch`; the buckets watch it when given.
void backward(nn::Transformer& model, const nn::Batch& batch, GradientBuckets* buckets) {
  Tape tape;
  if (buckets != nullptr) buckets->watch(tape);
  ops::CrossEntropyResult loss;
  {
    TapeScope scope(tape);
    auto ctx = nn::ForwardContext::training(1, DType::f32);
    loss = model.loss(batch, ctx, 1.0);
  }
  tape.backward(loss.loss);
}

TEST(GradientBuckets, BucketsStartDuringTheBackwardInOrderAndOnlyWhenFinal) {
  const ModelConfig config = bucket_config();
  const nn::Batch batch = fixed_batch(config);
  nn::Transformer reference(config), model(config);
  reference.init(3);
  model.init(3);
  backward(reference, batch, nullptr);

  RecordingCommunicator comm;
  GradientBuckets buckets(model.parameters(), comm, 512);
  ASSERT_GT(buckets.stats().buckets, 4);
  backward(model, batch, &buckets);
  const size_t started_in_backward = comm.starts.size();
  buckets.finish();
  EXPECT_EQ(comm.waits, 1);

  // Most buckets went while the backward ran (the embedding, used first in the forward and by the
  // output projection, is in the last one).
  EXPECT_GE(started_in_backward * 2, static_cast<size_t>(buckets.stats().buckets));
  ASSERT_EQ(comm.starts.size(), static_cast<size_t>(buckets.stats().buckets));
  // In order, covering the flat buffer once, and each as final as after the whole backward.
  const float* flat = buckets.flat().data<float>();
  size_t offset = 0;
  for (const auto& start : comm.starts) {
    ASSERT_EQ(start.data, flat + offset);
    for (size_t i = 0; i < start.values.size(); ++i)
      ASSERT_EQ(start.values[i], flat[offset + i]) << "element " << offset + i;
    offset += start.values.size();
  }
  EXPECT_EQ(offset, static_cast<size_t>(buckets.flat().numel()));
  // The gradients are those of the same backward without buckets, bit for bit.
  const auto expected = reference.named_parameters(), got = model.named_parameters();
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].second.grad().to_floats(), expected[k].second.grad().to_floats())
        << got[k].first;
  }
}

TEST(GradientBuckets, AGradientNoBatchWroteIsZeroNotStale) {
  const ModelConfig config = bucket_config();
  nn::Transformer model(config);
  model.init(4);
  Tensor unused = Tensor::zeros({5, 3});
  unused.set_requires_grad(true);
  std::vector<Tensor> parameters = model.parameters();
  parameters.push_back(unused);
  RecordingCommunicator comm;
  GradientBuckets buckets(parameters, comm, 4096);
  // A stale value from an earlier update, NaN included.
  unused.autograd_meta()->grad.fill(std::numeric_limits<float>::quiet_NaN());
  backward(model, fixed_batch(config), &buckets);
  buckets.finish();
  ASSERT_TRUE(unused.grad().defined());
  for (float g : unused.grad().to_floats()) EXPECT_EQ(g, 0.0f);
  EXPECT_GT(ops::global_norm({model.parameters()[0].grad()}), 0.0);
}

TEST(GradientBuckets, OneRankReducesNothing) {
  const ModelConfig config = bucket_config();
  nn::Transformer model(config);
  model.init(5);
  auto alone = dist::make_single_process();
  GradientBuckets buckets(model.parameters(), *alone, 4096);
  backward(model, fixed_batch(config), &buckets);
  buckets.finish();
  // The gradients live in the flat buffer all the same.
  const Tensor first = model.parameters()[0].grad();
  EXPECT_GT(ops::global_norm({first}), 0.0);
  EXPECT_EQ(buckets.stats().exposed_seconds, 0.0);
}

}  // namespace
}  // namespace tfm::internal
