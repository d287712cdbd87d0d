// Gradient buckets (train/gradient_buckets.h): each bucket starts its all-reduce while the backward
// is still running, in order, and only once its gradients are final.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "cuda_test_util.h"
#include "model_test_util.h"
#include "tfm/autograd/tape.h"
#include "tfm/nn/transformer.h"
#include "tfm/ops/ops.h"
#include "tfm/train/flat_parameters.h"
#include "tfm/train/gradient_buckets.h"

namespace tfm::internal {
namespace {

// Rank 0 of 2 whose partner adds zeros (or, with partner_doubles, the same values): records each
// bucket as it was when its all-reduce started.
class RecordingCommunicator final : public dist::Communicator {
 public:
  struct Start {
    float* data;
    std::vector<float> values;
  };
  std::vector<Start> starts;
  int waits = 0;
  bool partner_doubles = false;

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
  void wait_all() override {
    ++waits;
    for (const Start& start : starts)
      for (size_t i = 0; partner_doubles && i < start.values.size(); ++i)
        start.data[i] += start.values[i];
  }
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

// On a GPU each bucket is reduced in a host copy, taken when the bucket starts (so its values must
// already be final), and the sums come back to the device after the wait.
TEST(CudaGradientBuckets, EachBucketIsReducedInHostMemoryAndTheSumsComeBack) {
  TFM_REQUIRE_CUDA();
  const ModelConfig config = bucket_config();
  nn::Transformer initial(config);
  initial.init(6);
  const FlatParameters parameters =
      flatten(initial.named_parameters(), Device::cuda, FlatLayout::reversed);
  nn::Transformer model(config, parameters.views);
  RecordingCommunicator comm;
  comm.partner_doubles = true;
  GradientBuckets buckets(model.parameters(), comm, 512);
  ASSERT_GT(buckets.stats().buckets, 4);
  backward(model, fixed_batch(config).to(Device::cuda), &buckets);
  const size_t started_in_backward = comm.starts.size();
  buckets.finish();
  EXPECT_GE(started_in_backward * 2, static_cast<size_t>(buckets.stats().buckets));
  ASSERT_EQ(buckets.flat().device(), Device::cuda);
  // The summed buffer on the device is twice what each bucket held when it started: the values
  // sent were final, and the sums came back.
  const std::vector<float> summed = buckets.flat().to(Device::cpu).to_floats();
  size_t offset = 0;
  double norm = 0;
  for (const auto& start : comm.starts) {
    for (size_t i = 0; i < start.values.size(); ++i) {
      ASSERT_EQ(summed[offset + i], 2 * start.values[i]) << "element " << offset + i;
      norm += static_cast<double>(start.values[i]) * start.values[i];
    }
    offset += start.values.size();
  }
  EXPECT_EQ(offset, summed.size());
  EXPECT_GT(norm, 0.0);
  // Final: the same as the gradients of this backward without buckets on the same device.
  nn::Transformer reference(config, flatten(initial.named_parameters(), Device::cuda).views);
  backward(reference, fixed_batch(config).to(Device::cuda), nullptr);
  const auto expected = reference.named_parameters(), got = model.named_parameters();
  for (size_t k = 0; k < got.size(); ++k) {
    Tensor twice = expected[k].second.grad().to(Device::cpu);
    ops::scale_in_place({twice}, 2.0f);
    testing::expect_matches_cpu(twice, got[k].second.grad(), 1e-5, got[k].first);
  }
}

}  // namespace
}  // namespace tfm::internal
