#include "tfm/train/session.h"

#include <cmath>

#include "tfm/autograd/tape.h"
#include "tfm/ops/ops.h"

namespace tfm {

namespace {
// A distinct dropout seed per (run seed, update, batch within the update): reproducible, and the
// same after a resume.
uint64_t step_seed(uint64_t seed, int64_t step, size_t micro_batch) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(step) * 0xbf58476d1ce4e5b9ull +
               micro_batch;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  return z ^ (z >> 29);
}
}  // namespace

double EvalResult::perplexity() const {
  return std::exp(nll);
}

TrainingSession::TrainingSession(const ModelConfig& config, const SessionOptions& options)
    : options_(options), model_(config), adam_({}, options.adam) {
  model_.init(options.seed);
  adam_ = Adam(model_.parameters(), options.adam);
}

void TrainingSession::restore(const Checkpoint& checkpoint) {
  TFM_CHECK(checkpoint.config == model_.config(),
            "{}: the checkpoint's model configuration differs from the recipe's",
            checkpoint.dir.string());
  model_.load(checkpoint.parameters);
  adam_.restore(checkpoint.adam_steps, checkpoint.adam_m, checkpoint.adam_v);
}

UpdateResult TrainingSession::update(const std::vector<nn::Batch>& batches) {
  TFM_CHECK(!batches.empty(), "an update needs at least one batch");
  UpdateResult result;
  for (const nn::Batch& b : batches) {
    result.target_tokens += b.tgt_tokens;
    result.source_tokens += b.src_tokens;
  }
  TFM_CHECK(result.target_tokens > 0, "the batches of an update have no target tokens");
  const double normalizer = static_cast<double>(result.target_tokens);
  double nll_sum = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    Tape tape;
    ops::CrossEntropyResult loss;
    {
      TapeScope scope(tape);
      // With bf16 products each product converts its weight once per forward pass, and its
      // backward multiplies with that copy.
      auto ctx =
          nn::ForwardContext::training(step_seed(options_.seed, step(), i), options_.precision);
      loss = model_.loss(batches[i], ctx, normalizer);
    }
    tape.backward(loss.loss);  // gradients of the batches add up
    result.loss += loss.loss.to_floats()[0];
    nll_sum += loss.nll_sum;
  }
  result.nll = nll_sum / normalizer;
  result.grad_norm = gradient_norm();
  result.learning_rate = options_.schedule.learning_rate(step() + 1);
  // An overflow (a learning rate far too high, a bad batch) shows as a non-finite loss or norm:
  // the update is skipped rather than written into the weights and Adam's moments.
  result.skipped = !std::isfinite(result.loss) || !std::isfinite(result.grad_norm);
  if (!result.skipped) {
    clip_gradients(result.grad_norm);
    adam_.step(result.learning_rate);
  }
  adam_.zero_grad();
  return result;
}

// Global L2 norm of all gradients.
double TrainingSession::gradient_norm() const {
  std::vector<Tensor> grads;
  for (const Tensor& p : model_.parameters()) grads.push_back(p.grad());
  return ops::global_norm(grads);
}

// Scales the gradients to clip_norm when their norm is above it.
void TrainingSession::clip_gradients(double norm) {
  if (options_.clip_norm <= 0 || norm <= options_.clip_norm) return;
  std::vector<Tensor> grads;
  for (const Tensor& p : model_.parameters()) grads.push_back(p.grad());
  ops::scale_in_place(grads, static_cast<float>(options_.clip_norm / norm));
}

EvalResult TrainingSession::evaluate(const std::vector<nn::Batch>& batches) const {
  EvalResult result;
  double loss_sum = 0, nll_sum = 0;
  for (const nn::Batch& b : batches) {
    auto ctx = nn::ForwardContext::inference(options_.precision);
    ops::CrossEntropyResult loss = model_.loss(b, ctx, 1.0);  // normaliser 1: the sum
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

}  // namespace tfm
