// A training session: the model, Adam, the schedule and where training stands. One update()
// is one optimizer step over `accumulate` batches; validation, checkpoints and resuming live here
// too. The run around it (time limits, progress, logs) is train/training_run.h.
//
// Data-parallel training (docs/DISTRIBUTED.md): with a communicator of N ranks each rank's update()
// gets its own batches of the update, and every rank computes the update that one process would
// compute on all of them: the loss is normalised by the target tokens of the whole update (summed
// across ranks before the backward), each batch's dropout seed comes from its place in the
// update, not from the rank, and the gradients are summed across ranks in buckets while the
// backward runs (train/gradient_buckets.h). The optimizer then steps identically everywhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "tfm/dist/communicator.h"
#include "tfm/model/config.h"
#include "tfm/nn/batch.h"
#include "tfm/nn/transformer.h"
#include "tfm/train/adam.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/flat_parameters.h"
#include "tfm/train/gradient_buckets.h"
#include "tfm/train/schedule.h"

namespace tfm::internal {

struct SessionOptions {
  NoamSchedule schedule;
  AdamOptions adam;
  double clip_norm = 0.0;  // 0: off
  uint64_t seed = 1;
  // Operand type of the matrix products (nn::ForwardContext::precision); weights, optimizer state,
  // LayerNorm, softmax and the loss stay f32 either way.
  DType precision = DType::f32;
  // The job's ranks (nullptr: this process alone) and the size of a gradient bucket.
  dist::Communicator* communicator = nullptr;
  int64_t bucket_bytes = int64_t{4} << 20;
  // Where the weights, gradients, optimizer state and every op of a step live (ops::use_device
  // must have made it ready). Checkpoints are the same whichever device wrote them.
  Device device = Device::cpu;
  // > 0: keep an exponential moving average of the weights, updated after every applied update t
  // as ema = d_t ema + (1 - d_t) w with d_t = min(ema_decay, (1 + t) / (10 + t)): the warm-up form,
  // so that a short run's average does not hold the initial weights (it spans about the last
  // tenth of the updates until 1 / (1 - ema_decay) bounds it). 0: none.
  double ema_decay = 0.0;
  // > 0: R-Drop's consistency weight (nn::Transformer::loss): every batch twice, with the two
  // passes' symmetric KL divergence in the loss. 0: off.
  double rdrop_alpha = 0.0;
};

struct UpdateResult {
  double loss = 0;  // label-smoothed loss per target token
  double nll = 0;   // -log p(target) per target token (log of the perplexity)
  int64_t target_tokens = 0;
  int64_t source_tokens = 0;
  double learning_rate = 0;
  double grad_norm = 0;      // before clipping
  bool skipped = false;      // the loss or the gradient norm was not finite: no update was made
  bool abandoned = false;    // `stop` said so between two batches: no update was made
  int64_t batches_done = 0;  // of this rank's batches, when abandoned
  // (loss, nll and the token counts are the whole update's, over every rank)
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

  // Restores parameters, optimizer moments and the step from a checkpoint, and the moving average
  // when the session keeps one: the checkpoint's, or (a checkpoint without one) the weights.
  void restore(const Checkpoint& checkpoint);

  // One optimizer update from these batches: gradients are summed over them and normalised by
  // their total number of target tokens, so 2 half batches give the update of the whole batch.
  // When the loss or the gradient norm is not finite, nothing changes and `skipped` is set.
  // With several ranks, `batches` are this rank's share of the update and `first_batch` the
  // place of the first of them among all the update's batches (dropout seeds); every rank calls
  // update() together. `stop`, when given, is asked between two batches (a signal during a long
  // accumulation): when it says true the update is abandoned, nothing changes and `abandoned` is
  // set. With several ranks it must give every rank the same answer (it is a collective there).
  UpdateResult update(const std::vector<nn::Batch>& batches, int64_t first_batch = 0,
                      const std::function<bool()>& stop = {});

  // Makes every rank's parameters, optimizer state and step those of rank `root` (start-up and
  // resume: rank 0 initialised or read the checkpoint).
  void broadcast_state(int root);
  // A checksum of the parameters (CRC-32 of their bytes): equal on every rank of a healthy job.
  uint32_t parameters_checksum() const;
  const AllReduceStats& all_reduce_stats() const { return buckets_->stats(); }

  // Loss over batches, without a tape or dropout.
  EvalResult evaluate(const std::vector<nn::Batch>& batches) const;

  // The moving average of the weights (SessionOptions::ema_decay), named as the model's
  // parameters; empty when the session keeps none.
  nn::NamedTensors moving_average() const { return ema_.views; }
  bool has_moving_average() const { return ema_.flat.defined(); }
  // The decay of update `step`'s average: min(ema_decay, (1 + step) / (10 + step)).
  double moving_average_decay(int64_t step) const;
  // Runs `use` with the model's weights replaced by their moving average (evaluation, decoding),
  // and puts the weights back after it, also when it throws.
  void with_moving_average(const std::function<void()>& use);

  nn::Transformer& model() { return model_; }
  // model.dropout auto: the dropout chosen for the run (nn::Transformer::set_dropout).
  void set_dropout(double p) { model_.set_dropout(p); }
  const nn::Transformer& model() const { return model_; }
  const Adam& optimizer() const { return adam_; }
  int64_t step() const { return adam_.steps(); }
  const NoamSchedule& schedule() const { return options_.schedule; }
  // The schedule from the next update on (a budget-fitted warmup, train/run_cadence.h).
  void set_schedule(const NoamSchedule& schedule) { options_.schedule = schedule; }

 private:
  double gradient_norm() const;
  void clip_gradients(double norm);

  SessionOptions options_;
  std::unique_ptr<dist::Communicator> own_communicator_;  // when none was given
  dist::Communicator* communicator_;
  FlatParameters parameters_;  // the model's parameters are views of parameters_.flat
  FlatParameters ema_;         // their moving average (flat undefined: none)
  nn::Transformer model_;
  Adam adam_;
  std::unique_ptr<GradientBuckets> buckets_;
};

}  // namespace tfm::internal
