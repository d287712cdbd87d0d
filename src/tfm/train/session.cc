#include "tfm/train/session.h"

#include <algorithm>
#include <cmath>

#include "tfm/autograd/tape.h"
#include "tfm/io/checksum.h"
#include "tfm/ops/device.h"
#include "tfm/ops/ops.h"

namespace tfm::internal {

namespace {
// A distinct dropout seed per (run seed, update, batch within the update): reproducible, the same
// after a resume, and the same whichever rank computes the batch.
uint64_t step_seed(uint64_t seed, int64_t step, int64_t batch_in_update) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(step) * 0xbf58476d1ce4e5b9ull +
               static_cast<uint64_t>(batch_in_update);
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  return z ^ (z >> 29);
}
}  // namespace

double EvalResult::perplexity() const {
  return std::exp(nll);
}

namespace {
// The initial parameters of a run (drawn on the host, so that every device starts from the same
// weights), copied into one flat buffer on `device`, laid out as the gradients' (Adam::use_flat).
FlatParameters initial_parameters(const ModelConfig& config, uint64_t seed, Device device) {
  ops::use_device(device);
  nn::Transformer initial(config);
  initial.init(seed);
  return flatten(initial.named_parameters(), device, FlatLayout::reversed);
}

// MPI reads and writes host memory (Open MPI's collectives on a CUDA pointer would crash): a
// device's tensor is broadcast through a host copy.
void broadcast_tensor(dist::Communicator& communicator, Tensor tensor, int root) {
  const Tensor host = tensor.to(Device::cpu);  // the tensor itself when it is on the CPU
  communicator.broadcast(host.raw(), host.nbytes(), root);
  if (!host.same_storage(tensor)) tensor.copy_from(host);
}
}  // namespace

TrainingSession::TrainingSession(const ModelConfig& config, const SessionOptions& options)
    : options_(options),
      own_communicator_(options.communicator ? nullptr : dist::make_single_process()),
      communicator_(options.communicator ? options.communicator : own_communicator_.get()),
      parameters_(initial_parameters(config, options.seed, options.device)),
      model_(config, parameters_.views),
      adam_(model_.parameters(), options.adam),
      buckets_(std::make_unique<GradientBuckets>(model_.parameters(), *communicator_,
                                                 options.bucket_bytes)) {
  TFM_CHECK(options.ema_decay >= 0 && options.ema_decay < 1,
            "the moving average's decay must be in [0, 1), got {}", options.ema_decay);
  // The average is laid out as the weights, so that both are updated and swapped as whole buffers.
  if (options.ema_decay > 0)
    ema_ = flatten(parameters_.views, options.device, FlatLayout::reversed);
  adam_.use_flat(parameters_.flat, buckets_->flat());
}

void TrainingSession::restore(const Checkpoint& checkpoint) {
  TFM_CHECK(checkpoint.config == model_.config(),
            "{}: the checkpoint's model configuration differs from the recipe's",
            checkpoint.dir.string());
  model_.load(checkpoint.parameters);
  adam_.restore(checkpoint.adam_steps, checkpoint.adam_m, checkpoint.adam_v);
  if (!has_moving_average()) return;
  if (checkpoint.moving_average.empty()) {
    ema_.flat.copy_from(parameters_.flat);
    return;
  }
  TFM_CHECK(checkpoint.moving_average.size() == ema_.views.size(),
            "{}: the checkpoint's moving average has {} tensors, the model {}",
            checkpoint.dir.string(), checkpoint.moving_average.size(), ema_.views.size());
  for (size_t i = 0; i < ema_.views.size(); ++i) {
    const auto& [name, value] = checkpoint.moving_average[i];
    TFM_CHECK(name == ema_.views[i].first && value.shape() == ema_.views[i].second.shape(),
              "{}: the moving average's tensor '{}' {} is not the model's '{}' {}",
              checkpoint.dir.string(), name, value.shape().str(), ema_.views[i].first,
              ema_.views[i].second.shape().str());
    ema_.views[i].second.copy_from(value);
  }
}

double TrainingSession::moving_average_decay(int64_t step) const {
  const double warming = (1.0 + static_cast<double>(step)) / (10.0 + static_cast<double>(step));
  return std::min(options_.ema_decay, warming);
}

void TrainingSession::with_moving_average(const std::function<void()>& use) {
  TFM_CHECK(has_moving_average(), "the session keeps no moving average of the weights");
  Tensor weights = Tensor::empty(parameters_.flat.shape(), DType::f32, parameters_.flat.device());
  weights.copy_from(parameters_.flat);
  parameters_.flat.copy_from(ema_.flat);
  struct PutBack {
    Tensor& flat;
    const Tensor& weights;
    ~PutBack() { flat.copy_from(weights); }
  } put_back{parameters_.flat, weights};
  use();
}

UpdateResult TrainingSession::update(const std::vector<nn::Batch>& batches, int64_t first_batch,
                                     const std::function<bool()>& stop) {
  TFM_CHECK(!batches.empty(), "an update needs at least one batch");
  const bool distributed = communicator_->size() > 1;
  UpdateResult result;
  for (const nn::Batch& b : batches) {
    result.target_tokens += b.tgt_tokens;
    result.source_tokens += b.src_tokens;
  }
  if (distributed) {
    // The normaliser is the whole update's target tokens: each rank's gradient is then its share
    // of the one-process gradient, and their sum is that gradient.
    double tokens[2] = {static_cast<double>(result.target_tokens),
                        static_cast<double>(result.source_tokens)};
    communicator_->all_reduce_sum(std::span<double>(tokens));
    result.target_tokens = static_cast<int64_t>(tokens[0]);
    result.source_tokens = static_cast<int64_t>(tokens[1]);
  }
  TFM_CHECK(result.target_tokens > 0, "the batches of an update have no target tokens");
  const double normalizer = static_cast<double>(result.target_tokens);
  double sums[2] = {0, 0};  // loss, nll
  for (size_t i = 0; i < batches.size(); ++i) {
    // Before the last batch no bucket has been started: the gradients so far are only dropped.
    if (i > 0 && stop && stop()) {
      adam_.zero_grad();
      result.abandoned = true;
      result.batches_done = static_cast<int64_t>(i);
      return result;
    }
    Tape tape;
    // The last batch's backward completes the gradients: buckets are summed as it goes.
    if (i + 1 == batches.size()) buckets_->watch(tape);
    ops::CrossEntropyResult loss;
    {
      TapeScope scope(tape);
      // With bf16 products each product converts its weight once per forward pass, and its
      // backward multiplies with that copy.
      const int64_t batch_in_update = first_batch + static_cast<int64_t>(i);
      auto ctx = nn::ForwardContext::training(step_seed(options_.seed, step(), batch_in_update),
                                              options_.precision);
      loss = model_.loss(batches[i].to(options_.device), ctx, normalizer,
                         static_cast<float>(options_.rdrop_alpha));
    }
    tape.backward(loss.loss);  // gradients of the batches add up
    sums[0] += loss.loss.to_floats()[0];
    sums[1] += loss.nll_sum;
  }
  buckets_->finish();
  if (distributed) communicator_->all_reduce_sum(std::span<double>(sums));
  result.loss = sums[0];
  result.nll = sums[1] / normalizer;
  result.grad_norm = gradient_norm();
  result.learning_rate = options_.schedule.learning_rate(step() + 1);
  // An overflow (a learning rate far too high, a bad batch) shows as a non-finite loss or norm:
  // the update is skipped rather than written into the weights and Adam's moments.
  result.skipped = !std::isfinite(result.loss) || !std::isfinite(result.grad_norm);
  if (!result.skipped) {
    clip_gradients(result.grad_norm);
    adam_.step(result.learning_rate);
    if (has_moving_average())
      ops::moving_average(ema_.flat, parameters_.flat,
                          static_cast<float>(moving_average_decay(step())));
  }
  adam_.zero_grad();
  return result;
}

void TrainingSession::broadcast_state(int root) {
  if (communicator_->size() == 1) return;
  broadcast_tensor(*communicator_, parameters_.flat, root);
  for (const std::vector<Tensor>* moments : {&adam_.first_moments(), &adam_.second_moments()})
    for (const Tensor& t : *moments) broadcast_tensor(*communicator_, t, root);
  if (has_moving_average()) broadcast_tensor(*communicator_, ema_.flat, root);
  int64_t steps = adam_.steps();
  communicator_->broadcast(&steps, sizeof steps, root);
  adam_.set_steps(steps);
}

uint32_t TrainingSession::parameters_checksum() const {
  const Tensor host = parameters_.flat.to(Device::cpu);
  return crc32_of(host.raw(), host.nbytes());
}

// Global L2 norm of all gradients.
double TrainingSession::gradient_norm() const {
  if (adam_.flat_gradients_complete()) return ops::global_norm({buckets_->flat()});
  std::vector<Tensor> grads;
  for (const Tensor& p : model_.parameters()) grads.push_back(p.grad());
  return ops::global_norm(grads);
}

// Scales the gradients to clip_norm when their norm is above it.
void TrainingSession::clip_gradients(double norm) {
  if (options_.clip_norm <= 0 || norm <= options_.clip_norm) return;
  const auto scale = static_cast<float>(options_.clip_norm / norm);
  if (adam_.flat_gradients_complete()) {
    ops::scale_in_place({buckets_->flat()}, scale);
    return;
  }
  std::vector<Tensor> grads;
  for (const Tensor& p : model_.parameters()) grads.push_back(p.grad());
  ops::scale_in_place(grads, scale);
}

EvalResult TrainingSession::evaluate(const std::vector<nn::Batch>& batches) const {
  EvalResult result;
  double loss_sum = 0, nll_sum = 0;
  for (const nn::Batch& b : batches) {
    auto ctx = nn::ForwardContext::inference(options_.precision);
    // normaliser 1: the sum
    ops::CrossEntropyResult loss = model_.loss(b.to(options_.device), ctx, 1.0);
    loss_sum += loss.loss.to_floats()[0];
    nll_sum += loss.nll_sum;
    result.target_tokens += loss.tokens;
  }
  if (result.target_tokens > 0) {
    result.loss = loss_sum / static_cast<double>(result.target_tokens);
    result.nll = nll_sum / static_cast<double>(result.target_tokens);
  }
  return result;
}

}  // namespace tfm::internal
