// A training session: the model, Adam, the schedule and where training stands. One update()
// is one optimizer step over `accumulate` batches; validation, checkpoints and resuming live here
// too. The loop around it (time limits, progress, logs) is in train/train_loop.cc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "tfm/model/config.h"
#include "tfm/nn/batch.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/schedule.h"

namespace tfm {

struct SessionOptions {
  NoamSchedule schedule;
  AdamOptions adam;
  double clip_norm = 0.0;  // 0: off
  uint64_t seed = 1;
  // Operand type of the matrix products (nn::ForwardContext::precision); weights, optimizer state,
  // LayerNorm, softmax and the loss stay f32 either way.
  DType precision = DType::f32;
};

struct UpdateResult {
  double loss = 0;  // label-smoothed loss per target token
  double nll = 0;   // -log p(target) per target token (log of the perplexity)
  int64_t target_tokens = 0;
  int64_t source_tokens = 0;
  double learning_rate = 0;
  double grad_norm = 0;  // before clipping
  bool skipped = false;  // the loss or the gradient norm was not finite: no update was made
};

struct EvalResult {
  double loss = 0;  // label-smoothed, per target token
  double nll = 0;   // per target token
  int64_t target_tokens = 0;
  double perplexity() const;
};

class TrainingSession {
 public:
  TrainingSession(const ModelConfig& config, const SessionOptions& options);

  // Restores parameters, optimizer moments and the step from a checkpoint.
  void restore(const Checkpoint& checkpoint);

  // One optimizer update from these batches: gradients are summed over them and normalised by
  // their total number of target tokens, so 2 half batches give the update of the whole batch.
  // When the loss or the gradient norm is not finite, nothing changes and `skipped` is set.
  UpdateResult update(const std::vector<nn::Batch>& batches);

  // Loss over batches, without a tape or dropout.
  EvalResult evaluate(const std::vector<nn::Batch>& batches) const;

  nn::Transformer& model() { return model_; }
  const nn::Transformer& model() const { return model_; }
  const Adam& optimizer() const { return adam_; }
  int64_t step() const { return adam_.steps(); }
  const NoamSchedule& schedule() const { return options_.schedule; }
  // The schedule from the next update on (a budget-fitted warmup, train_loop.cc).
  void set_schedule(const NoamSchedule& schedule) { options_.schedule = schedule; }

 private:
  double gradient_norm() const;
  void clip_gradients(double norm);

  SessionOptions options_;
  nn::Transformer model_;
  Adam adam_;
};

}  // namespace tfm
