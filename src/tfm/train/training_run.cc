#include "tfm/train/training_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/data/word_dropout.h"
#include "tfm/dist/nccl_communicator.h"
#include "tfm/model/parameters.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/train/model_batch.h"
#include "tfm/train/rank_agreement.h"
#include "tfm/train/run_batch_size.h"
#include "tfm/train/run_vocab.h"

namespace fs = std::filesystem;

namespace tfm::internal {

namespace {

void say(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

// What must be equal on every rank, each part described as text.
std::vector<AgreementPart> agreement_parts(const TrainRecipe& recipe, const ModelConfig& config,
                                           const data::Vocabulary& vocab,
                                           const data::Batcher& batcher) {
  return {
      {"model configuration", config_to_json(config).dump()},
      {"vocabulary", vocab.hash()},
      {"training corpus or batching (data.*, training.seed)",
       fmt::format("{} {} {} {} {} {}", batcher.fingerprint(), recipe.accumulate,
                   recipe.bpe_dropout, recipe.bpe_dropout_sides, recipe.word_dropout,
                   recipe.word_dropout_sides)},
      {"optimizer, precision or limits",
       fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", recipe.lr_scale,
                   recipe.warmup, recipe.warmup_fraction, recipe.schedule, recipe.beta1,
                   recipe.beta2, recipe.eps, recipe.clip_norm, recipe.ema_decay, recipe.precision,
                   recipe.max_steps, recipe.max_epochs, recipe.max_minutes,
                   recipe.checkpoint_every_steps, recipe.checkpoint_every_minutes,
                   recipe.checkpoint_every_fraction, recipe.validate_every_steps,
                   recipe.rdrop_alpha, recipe.weight_decay)},
  };
}

}  // namespace

TrainingRun::TrainingRun(const TrainRecipe& recipe, const TrainRunOptions& options)
    : recipe_(recipe), options_(options), warmup_(recipe, !schedule_fits_budget(recipe)) {
  validate(recipe);
  // A GPU that cannot be used is reported before the run directory is touched.
  ops::use_device(ops::parse_device(recipe_.device));
  set_up_ranks();
  prepare_vocabulary();
  load_corpora();
  choose_batch_size();
  create_session();
  resume();
  share_start();
  announce();
}

void TrainingRun::set_up_ranks() {
  if (options_.communicator == nullptr) alone_ = dist::make_single_process();
  comm_ = options_.communicator ? options_.communicator : alone_.get();
  rank_ = comm_->rank();
  ranks_ = comm_->size();
  lead_ = rank_ == 0;
  note_ = lead_ ? std::function<void(const std::string&)>(say) : [](const std::string&) {};
  int threads = recipe_.threads;
  if (ranks_ > 1 && threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr)
    threads = default_threads_per_rank();
  set_num_threads(threads);
}

void TrainingRun::prepare_vocabulary() {
  run_dir_ = recipe_.run_dir;
  checkpoint_dir_ = run_dir_ / "checkpoints";
  std::optional<data::Vocabulary> rank0_vocab;
  if (lead_) {
    lock_.emplace(run_dir_);
    has_checkpoints_ = prepare_run_directory(recipe_, options_.resume, note_);
    rank0_vocab.emplace(prepare_run_vocabulary(recipe_, run_dir_, has_checkpoints_, note_));
  }
  vocab_.emplace(share_vocabulary(*comm_, std::move(rank0_vocab)));
  config_ = recipe_.model_config(vocab_->size());
}

void TrainingRun::load_corpora() {
  corpus_options_ = training_corpus_options(recipe_, config_, run_dir_, note_);
  train_.emplace(load_training_corpus(recipe_, *vocab_, corpus_options_, *comm_));
  note_("train: " + train_->stats().summary());
  has_valid_ = !recipe_.valid_source.empty() && lead_;
  if (has_valid_)
    valid_ =
        load_validation_set(recipe_, *vocab_, corpus_options_, config_.longest_sequence(), note_);
}

void TrainingRun::choose_batch_size() {
  session_options_.device = ops::parse_device(recipe_.device);
  session_options_.precision =
      ops::parse_precision(recipe_.precision, "training.precision", session_options_.device);
  const BatchSize batch_size =
      run_batch_size(recipe_, config_, session_options_.device, session_options_.precision, *comm_,
                     has_checkpoints_, note_);
  recipe_.max_tokens = batch_size.max_tokens;
  recipe_.accumulate = batch_size.accumulate;
}

dist::Communicator* TrainingRun::gradient_communicator() {
  if (ranks_ == 1 || session_options_.device != Device::cuda) return comm_;
  std::string why;
#ifdef TFM_HAVE_NCCL
  // TFM_NCCL=0 on any rank keeps every rank host-staged: make_nccl is collective, so the ranks
  // agree first on whether to call it.
  const char* setting = std::getenv("TFM_NCCL");
  const bool wanted = setting == nullptr || std::string(setting) != "0";
  const std::vector<uint64_t> wanted_by = comm_->all_gather(wanted);
  const auto refusing = std::find(wanted_by.begin(), wanted_by.end(), uint64_t{0});
  if (refusing != wanted_by.end())
    why = fmt::format("TFM_NCCL=0 on rank {}", refusing - wanted_by.begin());
  else
    nccl_ = dist::make_nccl(*comm_, ops::device_queue(Device::cuda), &why);
#else
  why = "tfm was built without NCCL";
#endif
  if (nccl_ == nullptr) {
    note_("gradients: summed host-staged over MPI: " + why);
    return comm_;
  }
  // "NCCL 2.28.9 over MPI (...)": the name and version.
  const std::string name = nccl_->describe();
  note_(fmt::format("gradients: summed by {} on each rank's GPU",
                    name.substr(0, name.find(" over "))));
  return nccl_.get();
}

void TrainingRun::create_session() {
  session_options_.schedule =
      NoamSchedule{config_.d_model, recipe_.warmup, recipe_.lr_scale,
                   parse_schedule_shape(recipe_.schedule, "optimizer.schedule")};
  session_options_.adam =
      AdamOptions{recipe_.beta1, recipe_.beta2, recipe_.eps, recipe_.weight_decay};
  session_options_.clip_norm = recipe_.clip_norm;
  session_options_.ema_decay = recipe_.ema_decay;
  session_options_.rdrop_alpha = recipe_.rdrop_alpha;
  session_options_.seed = recipe_.seed;
  session_options_.communicator = gradient_communicator();
  session_options_.bucket_bytes = static_cast<int64_t>(recipe_.allreduce_bucket_mb * (1 << 20));
  session_.emplace(config_, session_options_);
  data::BatcherOptions batch_options;
  batch_options.max_tokens = recipe_.max_tokens;
  batch_options.window_batches = recipe_.shuffle_window;
  if (recipe_.bpe_dropout > 0)
    subword_dropout_.emplace(*vocab_, recipe_.bpe_dropout, corpus_options_.max_length,
                             recipe_.bpe_dropout_sides == "both");
  batcher_.emplace(*train_, batch_options, recipe_.seed,
                   subword_dropout_ ? &*subword_dropout_ : nullptr);
  if (subword_dropout_) {
    const auto& plain = train_->stats();
    const auto& first = batcher_->current_corpus().stats();
    note_(fmt::format(
        "BPE-dropout {:g}: each epoch's {} are segmented anew (data.bpe_dropout); the first "
        "epoch's pairs hold {:.2f}x the tokens of the plain segmentation, in {} batches",
        recipe_.bpe_dropout, subword_dropout_->targets() ? "pairs" : "sources",
        static_cast<double>(first.source_tokens + first.target_tokens) /
            static_cast<double>(std::max<int64_t>(plain.source_tokens + plain.target_tokens, 1)),
        batcher_->batches_in_epoch()));
  }
  if (batcher_->skipped_pairs() > 0)
    note_(fmt::format("{} pairs exceed the batch budget alone and are skipped",
                      batcher_->skipped_pairs()));
  check_ranks_agree(*comm_, agreement_parts(recipe_, config_, *vocab_, *batcher_));
}

void TrainingRun::resume() {
  if (!options_.resume || !lead_) return;
  auto checkpoint = load_latest_checkpoint(checkpoint_dir_, note_);
  if (!checkpoint) {
    note_("no checkpoint to resume from: starting a new run");
    return;
  }
  check_checkpoint_vocabulary(*vocab_, checkpoint->dir);
  // model.dropout auto: the dropout the run chose (a checkpoint saved before the choice has 0 and
  // is fitted again with the schedule).
  if (recipe_.dropout_auto()) set_dropout(checkpoint->config.dropout);
  session_->restore(*checkpoint);
  if (session_->has_moving_average() && checkpoint->moving_average.empty())
    note_(fmt::format("{} has no moving average of the weights: it starts again from them",
                      checkpoint->dir.string()));
  const TrainingState& s = checkpoint->state;
  uint64_t fingerprint = s.extra.value("batcher_fingerprint", uint64_t{0});
  TFM_CHECK(fingerprint == batcher_->fingerprint(),
            "{}: the corpus, batching options or seed changed since this checkpoint; resume "
            "needs the same data and recipe",
            checkpoint->dir.string());
  batcher_->restore({s.epoch, s.batch_in_epoch});
  start_ = run_start_from(s, recipe_);
  restore_fitted_schedule();
  note_(fmt::format("resuming from {} (step {}, epoch {}, batch {})", checkpoint->dir.string(),
                    s.step, s.epoch + 1, s.batch_in_epoch));
  drop_replayed_metrics(run_dir_ / "metrics.jsonl", session_->step());
  summary_.last_checkpoint = checkpoint->dir.string();
}

// A resumed run keeps the warmup, the decay's end and its anchor its checkpoint recorded, whatever
// speed this process measures: the same update gets the same learning rate (under a time budget
// until the next checkpoint estimates the end again). What the checkpoint lacks (saved before the
// fit, or with another recipe) is fitted again.
void TrainingRun::restore_fitted_schedule() {
  NoamSchedule schedule = session_options_.schedule;
  if (start_.fitted_warmup) schedule = schedule.with_warmup_at_same_peak(*start_.fitted_warmup);
  if (start_.decay_end) schedule = schedule.with_decay_end(*start_.decay_end);
  if (start_.decay_end && start_.decay_from) {
    schedule.decay_from = *start_.decay_from;
    schedule.decay_from_progress = start_.decay_from_progress;
  }
  session_->set_schedule(schedule);
  const bool warmup_kept = recipe_.warmup_fraction <= 0 || start_.fitted_warmup.has_value();
  const bool decay_kept = recipe_.schedule == "noam" || start_.decay_end.has_value();
  if (schedule_fits_budget(recipe_) && warmup_kept && decay_kept) {
    warmup_.set_fitted(true);
    // Stopped before the warmup's end: the end is estimated again there, as in one process.
    warmup_.plan_decay_refit(schedule.warmup, session_->step());
  }
}

// Every rank starts where rank 0 stands: its weights, Adam's moments and step, the data position
// (global: the same for any number of ranks) and the schedule.
void TrainingRun::share_start() {
  if (ranks_ == 1) return;
  session_->broadcast_state(0);
  const nlohmann::json where = nlohmann::json::parse(broadcast_text(
      *comm_, nlohmann::json{{"epoch", batcher_->state().epoch},
                             {"batch", batcher_->state().batch},
                             {"elapsed_s", start_.elapsed_before},
                             {"warmup", session_->schedule().warmup},
                             {"decay_end", session_->schedule().decay_end},
                             {"decay_from", session_->schedule().decay_from},
                             {"decay_from_progress", session_->schedule().decay_from_progress},
                             {"warmup_fitted", warmup_.fitted()},
                             {"dropout", config_.dropout},
                             {"last_checkpoint", summary_.last_checkpoint}}
                  .dump()));
  batcher_->restore({where["epoch"].get<int64_t>(), where["batch"].get<int64_t>()});
  if (recipe_.dropout_auto()) set_dropout(where["dropout"].get<double>());
  start_.elapsed_before = where["elapsed_s"].get<double>();
  NoamSchedule schedule =
      session_options_.schedule.with_warmup_at_same_peak(where["warmup"].get<int64_t>());
  if (const auto end = where["decay_end"].get<int64_t>(); end > 0)
    schedule = schedule.with_decay_end(end);
  schedule.decay_from = where["decay_from"].get<int64_t>();
  schedule.decay_from_progress = where["decay_from_progress"].get<double>();
  session_->set_schedule(schedule);
  warmup_.set_fitted(where["warmup_fitted"].get<bool>());
  if (warmup_.fitted()) warmup_.plan_decay_refit(schedule.warmup, session_->step());
  summary_.last_checkpoint = where["last_checkpoint"].get<std::string>();
  check_ranks_agree(*comm_, {{"initial weights", std::to_string(session_->parameters_checksum())}});
}

void TrainingRun::announce() {
  note_(fmt::format(
      "model: {} layers, d_model {}, {:.2f} M parameters; batches of {} tokens x {}{}; "
      "{} products{} on {}",
      config_.decoder_layers < 0 ? std::to_string(config_.layers)
                                 : fmt::format("{}+{}", config_.layers, config_.decoder_layers),
      config_.d_model, static_cast<double>(parameter_count(config_)) / 1e6, recipe_.max_tokens,
      recipe_.accumulate, ranks_ > 1 ? fmt::format(" x {} ranks", ranks_) : "",
      dtype_name(session_options_.precision),
      ops::describe_products(session_options_.precision, session_options_.device),
      ops::describe_device(session_options_.device)));
  if (recipe_.word_dropout > 0)
    note_(
        fmt::format("word dropout {:g}: each training {} token replaced by <unk> with this "
                    "probability (data.word_dropout)",
                    recipe_.word_dropout,
                    recipe_.word_dropout_sides == "both" ? "source and decoder input" : "source"));
  if (ranks_ > 1) {
    const AllReduceStats& reduce = session_->all_reduce_stats();
    note_(
        fmt::format("{}; {} threads per rank; gradients ({:.1f} MiB) all-reduced in {} bucket{} "
                    "of at most about {} MiB",
                    comm_->describe(), num_threads(), static_cast<double>(reduce.bytes) / (1 << 20),
                    reduce.buckets, reduce.buckets == 1 ? "" : "s", recipe_.allreduce_bucket_mb));
  }
  update_budget_ = update_budget(recipe_, updates_per_epoch());
  warmup_.set_update_budget(update_budget_);
  if (const std::optional<double> updates = warmup_.at_start(note_)) fit_schedule(*updates);
  checkpoint_every_ = checkpoint_interval(recipe_, update_budget_);
  if (recipe_.checkpoint_every_fraction > 0)
    note_(describe_checkpoint_interval(checkpoint_every_, recipe_.keep_checkpoints));
}

void TrainingRun::fit_schedule(double expected_updates) {
  NoamSchedule schedule = session_options_.schedule;
  if (recipe_.warmup_fraction > 0) {
    // Not before the update it is fitted at: on a slow or loaded machine (or with a small fraction)
    // a time budget's timed updates can outlast warmup_fraction of the updates the budget allows,
    // and a warmup that had ended already would have the rate climb (on the recipe's warmup) past
    // the fitted warmup's end, then jump.
    const int64_t fitted = fitted_warmup(recipe_, expected_updates);
    const int64_t now = std::max<int64_t>(1, session_->step());
    schedule = schedule.with_warmup_at_same_peak(std::max(fitted, now));
    // Under a time budget, the speed the estimate assumed: the updates it timed.
    const std::string speed = warmup_.probe_seconds_per_update() > 0
                                  ? fmt::format(" at {:.4g} ms an update (updates {}-{})",
                                                warmup_.probe_seconds_per_update() * 1e3,
                                                warmup_.probe_first_step(), session_->step())
                                  : "";
    const std::string late =
        fitted < now ? fmt::format("; {} by the fraction, passed already", fitted) : "";
    note_(fmt::format(
        "warmup: {} updates ({:g} of the about {:.0f} updates of the budget{}, at most {}{}) to "
        "the peak learning rate {:.3g}",
        schedule.warmup, recipe_.warmup_fraction, expected_updates, speed, recipe_.warmup, late,
        schedule.peak()));
  }
  if (schedule.shape != ScheduleShape::noam) {
    schedule = schedule.with_decay_end(decay_end(expected_updates));
    note_(fmt::format(
        "schedule: {} decay from the peak learning rate {:.3g} at update {} to 0 at "
        "update {} ({})",
        recipe_.schedule, schedule.peak(), schedule.warmup, schedule.decay_end,
        describe_budget_length(recipe_, update_budget_, session_->step(), expected_updates)));
    if (decay_end(expected_updates) <= schedule.warmup)
      note_(fmt::format(
          "schedule: the budget's about {:.0f} updates end within the warmup of {}: the rate is "
          "0 from update {} on (optimizer.warmup_fraction fits the warmup to the budget)",
          expected_updates, schedule.warmup, schedule.decay_end));
  }
  session_->set_schedule(schedule);
  warmup_.set_fitted(true);
  warmup_.plan_decay_refit(schedule.warmup, session_->step());
  if (recipe_.dropout_auto()) choose_dropout(expected_updates);
}

// model.dropout auto, with the first estimate of the budget's updates: the dropout for its epochs.
void TrainingRun::choose_dropout(double expected_updates) {
  const double epochs = expected_updates / std::max(updates_per_epoch(), 1.0);
  set_dropout(dropout_for_epochs(epochs));
  note_(fmt::format("dropout: {:g} for the about {:.1f} epochs of the budget (model.dropout auto)",
                    config_.dropout, epochs));
}

// An epoch's batches over the batches of one update (data.accumulate on each of the ranks).
double TrainingRun::updates_per_epoch() const {
  return static_cast<double>(batcher_->batches_in_epoch()) /
         static_cast<double>(std::max<int64_t>(recipe_.accumulate * ranks_, 1));
}

void TrainingRun::set_dropout(double p) {
  config_.dropout = p;
  session_->set_dropout(p);
}

// The second estimate of a decaying schedule's end (WarmupFit::plan_decay_refit), at the warmup's
// end: the rate there is the peak whatever the end, so the curve stays continuous.
void TrainingRun::refit_decay(double expected_updates) {
  const NoamSchedule before = session_->schedule();
  // The decay needs at least one update after this one.
  const int64_t end = std::max(decay_end(expected_updates), session_->step() + 1);
  session_->set_schedule(before.with_decay_end(end));
  note_(fmt::format(
      "schedule: the decay's end estimated again at the warmup's end, from the speed of the "
      "updates so far: 0 at update {} (was {})",
      end, before.decay_end));
}

// During a time budget's decay, at each checkpoint: the end estimated again from the speed of the
// updates so far (WarmupFit::decay_estimate); when it moved, the progress is re-anchored here and
// the move said.
void TrainingRun::refit_decay_during_decay() {
  const NoamSchedule before = session_->schedule();
  const std::optional<double> updates =
      warmup_.decay_estimate(session_->step(), before.warmup, [this] { return clock_->elapsed(); });
  if (!updates || before.decay_end == 0) return;
  const NoamSchedule after = before.with_decay_end_from(session_->step(), decay_end(*updates));
  if (after.decay_end == before.decay_end) return;  // the same line: nothing to move
  session_->set_schedule(after);
  note_(
      fmt::format("schedule: the decay's end estimated again at update {}: 0 at update {} (was {})",
                  session_->step(), after.decay_end, before.decay_end));
}

TrainSummary TrainingRun::run() {
  if (lead_) metrics_ = MetricsLog(run_dir_ / "metrics.jsonl", options_.on_record);
  StopSignals signals;
  clock_.emplace(*comm_, start_.elapsed_before);
  clock_->agree();
  cadence_.emplace(checkpoint_every_, session_->step(), clock_->elapsed());
  has_checkpoint_ = !summary_.last_checkpoint.empty();
  progress_.restart();
  while (!limits_reached(recipe_, session_->step(), completed_epochs(), clock_->elapsed()) &&
         !clock_->stop_requested()) {
    if (!update()) break;
  }
  finish();
  return summary_;
}

// Epochs done: the batcher stays on an epoch's end until the next batch is asked for.
int64_t TrainingRun::completed_epochs() const {
  return batcher_->state().epoch +
         (batcher_->state().batch >= batcher_->batches_in_epoch() ? 1 : 0);
}

bool TrainingRun::update() {
  const int64_t epochs_before = completed_epochs();
  const data::Batcher::State position_before = batcher_->state();
  // The update's accumulate x ranks batches, in the batcher's (global) order: rank r computes
  // those from r x accumulate on, as one process with accumulate x ranks would.
  std::vector<nn::Batch> batches;
  const data::WordDropout word_dropout{recipe_.word_dropout, recipe_.word_dropout_sides == "both"};
  for (int64_t i = 0; i < recipe_.accumulate * ranks_; ++i) {
    if (i / recipe_.accumulate == rank_) {
      const data::Batcher::State where = batcher_->state();
      data::TokenBatch batch = batcher_->next();
      data::drop_words(batch, word_dropout, recipe_.seed, where);
      batches.push_back(model_batch(batch, config_.decoder_start()));
    } else {
      batcher_->skip();
    }
  }
  // A signal during the accumulation abandons the update: nothing was applied, and the data
  // position goes back to its start, so the checkpoint saved at the end is exactly the last update.
  const UpdateResult result = session_->update(batches, rank_ * recipe_.accumulate,
                                               [this] { return clock_->stop_between_batches(); });
  if (result.abandoned) {
    batcher_->restore(position_before);
    clock_->stop();
    note_(fmt::format("step {}: interrupted after {} of its {} batches: the update is dropped",
                      session_->step() + 1, result.batches_done, recipe_.accumulate));
    return false;
  }
  clock_->agree();
  if (result.skipped) {
    skip(result);
    return true;
  }
  non_finite_.finite();
  progress_.add(result);
  if (const std::optional<double> updates =
          warmup_.after_update(session_->step(), [this] { return clock_->elapsed(); }))
    fit_schedule(*updates);
  if (const std::optional<double> updates =
          warmup_.decay_refit(session_->step(), [this] { return clock_->elapsed(); }))
    refit_decay(*updates);
  if (session_->step() % recipe_.log_every == 0) log_progress(result);
  const bool epoch_ended = completed_epochs() != epochs_before;
  summary_.epochs_completed = completed_epochs();
  if (validation_due(recipe_, session_->step(), epoch_ended)) run_validation();
  if (cadence_->due(session_->step(), clock_->elapsed())) {
    refit_decay_during_decay();
    save();
  }
  return true;
}

void TrainingRun::skip(const UpdateResult& result) {
  const int64_t in_a_row = non_finite_.skipped();
  ++summary_.skipped_updates;
  note_(fmt::format(
      "step {}: loss {} and gradient norm {} are not finite: update skipped ({} in a row)",
      session_->step() + 1, result.loss, result.grad_norm, in_a_row));
  metrics_.write({{"type", "skipped"},
                  {"step", session_->step() + 1},
                  {"loss", fmt::format("{}", result.loss)},
                  {"grad_norm", fmt::format("{}", result.grad_norm)},
                  {"elapsed_s", clock_->elapsed()}});
  non_finite_.check(session_->step() + 1, recipe_.lr_scale, summary_.last_checkpoint);
}

void TrainingRun::log_progress(const UpdateResult& result) {
  const ProgressWindow::Totals totals = progress_.totals();
  ProgressPoint at;
  at.step = session_->step();
  at.epoch = batcher_->state().epoch + 1;
  at.epoch_fraction = static_cast<double>(batcher_->state().batch) /
                      static_cast<double>(std::max<int64_t>(batcher_->batches_in_epoch(), 1));
  at.learning_rate = result.learning_rate;
  at.remaining = time_left(recipe_, at.step, totals.seconds_per_update, clock_->elapsed());
  at.elapsed = clock_->elapsed();
  note_(progress_line(at, totals));
  metrics_.write({{"type", "train"},
                  {"step", at.step},
                  {"epoch", at.epoch},
                  {"loss", totals.loss},
                  {"perplexity", totals.perplexity},
                  {"lr", result.learning_rate},
                  {"grad_norm", result.grad_norm},
                  {"tokens_per_second", totals.tokens_per_second},
                  {"elapsed_s", clock_->elapsed()}});
  progress_.restart();
}

void TrainingRun::run_validation() {
  if (!has_valid_) return;
  last_validation_step_ = session_->step();
  const std::vector<nn::Batch> batches =
      validation_batches(valid_.corpus, recipe_.max_tokens, config_.decoder_start());
  const EvalResult result = session_->evaluate(batches);
  summary_.last_valid_loss = result.loss;
  nlohmann::json record = {{"type", "valid"},
                           {"step", session_->step()},
                           {"epoch", batcher_->state().epoch + 1},
                           {"loss", result.loss},
                           {"nll", result.nll},
                           {"perplexity", result.perplexity()},
                           {"elapsed_s", clock_->elapsed()}};
  std::string line = fmt::format("valid | step {} | loss {:.4f} | ppl {:.2f}", session_->step(),
                                 result.loss, result.perplexity());
  // A parsing model's score is bracketing F1 (eval/validation_bleu.h).
  const bool parsing = session_->model().config().task == "parsing";
  const bool score = recipe_.validate_bleu && options_.bleu;
  if (score) {
    const double value =
        options_.bleu(session_->model(), *vocab_, valid_.sources, valid_.references);
    summary_.last_valid_bleu = value;
    record[parsing ? "f1" : "bleu"] = value;
    line += fmt::format(" | {} {:.2f} (greedy)", parsing ? "F1" : "BLEU", value);
  }
  if (session_->has_moving_average()) {
    // The same measures of the weights' moving average, the model a budgeted run ends with.
    session_->with_moving_average([&] {
      const EvalResult average = session_->evaluate(batches);
      record["ema_loss"] = average.loss;
      line += fmt::format(" | EMA loss {:.4f}", average.loss);
      if (!score) return;
      const double value =
          options_.bleu(session_->model(), *vocab_, valid_.sources, valid_.references);
      record[parsing ? "ema_f1" : "ema_bleu"] = value;
      line += fmt::format(" {} {:.2f}", parsing ? "F1" : "BLEU", value);
    });
  }
  metrics_.write(record);
  note_(line);
}

void TrainingRun::save() {
  // Every rank's weights must still be rank 0's: a difference would be saved as if it were not.
  if (ranks_ > 1)
    check_ranks_agree(*comm_, {{"weights (the ranks diverged)",
                                std::to_string(session_->parameters_checksum())}});
  cadence_->saved(session_->step(), clock_->elapsed());
  has_checkpoint_ = true;
  if (!lead_) return;
  check_parameters_finite(session_->model().named_parameters(), session_->step(),
                          summary_.last_checkpoint);
  RunPosition at;
  at.step = session_->step();
  at.data = batcher_->state();
  at.batcher_fingerprint = batcher_->fingerprint();
  at.elapsed_seconds = clock_->elapsed();
  if (warmup_.fitted()) at.fitted_warmup = session_->schedule().warmup;
  if (warmup_.fitted() && session_->schedule().decay_end > 0) {
    at.decay_end = session_->schedule().decay_end;
    if (session_->schedule().decay_from > 0) {
      at.decay_from = session_->schedule().decay_from;
      at.decay_from_progress = session_->schedule().decay_from_progress;
    }
  }
  const TrainingState state =
      checkpoint_state(recipe_, at, start_, std::string(dtype_name(session_options_.precision)));
  const fs::path dir =
      save_checkpoint(checkpoint_dir_, config_, session_->model().named_parameters(),
                      session_->optimizer(), state, {vocab_->path()}, session_->moving_average());
  prune_checkpoints(checkpoint_dir_, static_cast<int>(recipe_.keep_checkpoints));
  summary_.last_checkpoint = dir.string();
}

void TrainingRun::finish() {
  summary_.interrupted = clock_->stop_requested();
  if (summary_.interrupted) note_("interrupted: saving a checkpoint");
  if (session_->step() != cadence_->last_step() || !has_checkpoint_) save();
  if (!summary_.interrupted && last_validation_step_ != session_->step()) run_validation();
  summary_.steps = session_->step();
  summary_.elapsed_seconds = clock_->elapsed();
  note_(fmt::format("{} at step {} after {}; last checkpoint {}",
                    summary_.interrupted ? "stopped" : "done", summary_.steps,
                    clock_text(summary_.elapsed_seconds), summary_.last_checkpoint));
}

}  // namespace tfm::internal
