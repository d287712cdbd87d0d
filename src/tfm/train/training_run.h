// One `tfm train` run (run_training, train/train_loop.h) as an object. The constructor sets the
// run up, in this order: the ranks and threads; the run directory and the vocabulary (rank 0); the
// corpora; the batch size (before the model is allocated: the memory seen is what the model, Adam
// and the batches will share); the session and the batcher; the resume (rank 0); the start shared
// by every rank; the start-up lines and the warmup fitted at the start. run() then trains update
// by update until a limit or a signal, validating and saving on their cadence, saves and
// validates once more at the end, and says how the run ended.
//
// Its parts, each testable alone: train/run_batch_size.h (the batch size), run_data.h (corpora
// and validation batches), run_state.h (run directory, resume state, state.json), run_cadence.h
// (limits, checkpoint and validation cadence, the budget-fitted warmup, non-finite updates),
// stop_signals.h (signals and the clock the ranks agree on), run_progress.h (progress lines) and
// run_metrics.h (metrics.jsonl).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "tfm/data/batcher.h"
#include "tfm/data/corpus.h"
#include "tfm/data/vocab.h"
#include "tfm/dist/communicator.h"
#include "tfm/train/recipe.h"
#include "tfm/train/run_cadence.h"
#include "tfm/train/run_data.h"
#include "tfm/train/run_lock.h"
#include "tfm/train/run_metrics.h"
#include "tfm/train/run_progress.h"
#include "tfm/train/run_state.h"
#include "tfm/train/session.h"
#include "tfm/train/stop_signals.h"
#include "tfm/train/train_loop.h"

namespace tfm::internal {

class TrainingRun {
 public:
  TrainingRun(const TrainRecipe& recipe, const TrainRunOptions& options);
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Trains to the end (once).
  TrainSummary run();

 private:
  // Set-up, in the order the constructor calls them.
  void set_up_ranks();
  void prepare_vocabulary();
  void load_corpora();
  void choose_batch_size();
  // The communicator that sums the gradients: NCCL when the ranks train on GPUs of their own,
  // else the job's (host-staged on a GPU). Said on rank 0's log.
  dist::Communicator* gradient_communicator();
  void create_session();
  void resume();
  void share_start();
  void announce();

  // Training.
  bool update();  // one update; false when a signal abandoned it
  void skip(const UpdateResult& result);
  void log_progress(const UpdateResult& result);
  void restore_fitted_schedule();
  // The warmup (optimizer.warmup_fraction) and the decay's end (optimizer.schedule) fitted to the
  // run's `expected_updates`, each said in the log.
  void fit_schedule(double expected_updates);
  // model.dropout auto: the dropout for the epochs of `expected_updates` (dropout_for_epochs).
  void choose_dropout(double expected_updates);
  void set_dropout(double p);  // the run's configuration and its model's
  double updates_per_epoch() const;
  void refit_decay(double expected_updates);
  void refit_decay_during_decay();
  void run_validation();
  void save();
  void finish();
  int64_t completed_epochs() const;

  TrainRecipe recipe_;  // data.max_tokens and data.accumulate become numbers (auto)
  const TrainRunOptions& options_;
  std::unique_ptr<dist::Communicator> alone_;  // when options_ gives none
  dist::Communicator* comm_ = nullptr;
  // NCCL over comm_ for the gradients of GPU ranks (dist/nccl_communicator.h), when it is used;
  // declared before session_, which refers to it, so that it outlives the session.
  std::unique_ptr<dist::Communicator> nccl_;
  int rank_ = 0, ranks_ = 1;
  bool lead_ = true;  // rank 0 alone speaks, validates and writes the run directory
  std::function<void(const std::string&)> note_;
  std::filesystem::path run_dir_, checkpoint_dir_;
  std::optional<RunDirectoryLock> lock_;
  bool has_checkpoints_ = false;  // rank 0: the run directory held checkpoints at the start
  std::optional<data::Vocabulary> vocab_;
  ModelConfig config_;
  data::CorpusOptions corpus_options_;
  std::optional<data::Corpus> train_;
  bool has_valid_ = false;
  ValidationSet valid_;
  SessionOptions session_options_;
  std::optional<TrainingSession> session_;
  std::optional<data::SubwordDropout> subword_dropout_;  // before batcher_, which points to it
  std::optional<data::Batcher> batcher_;
  RunStart start_;
  TrainSummary summary_;
  WarmupFit warmup_;
  int64_t update_budget_ = 0;  // run_cadence.h's update_budget; 0: none
  CheckpointInterval checkpoint_every_;

  // While run() trains.
  MetricsLog metrics_;
  std::optional<RunClock> clock_;
  std::optional<CheckpointCadence> cadence_;
  bool has_checkpoint_ = false;  // known on every rank (only rank 0 knows the checkpoint's path)
  int64_t last_validation_step_ = -1;
  ProgressWindow progress_;
  NonFiniteUpdates non_finite_;
};

}  // namespace tfm::internal
