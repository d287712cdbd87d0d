#include "tfm/train/train_loop.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "tfm/core/allocator.h"
#include "tfm/core/threading.h"
#include "tfm/data/batcher.h"
#include "tfm/data/corpus.h"
#include "tfm/data/vocab.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/text_reader.h"
#include "tfm/model/model_dir.h"
#include "tfm/model/parameters.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/train/batch_size.h"
#include "tfm/train/model_batch.h"
#include "tfm/train/rank_agreement.h"
#include "tfm/train/run_lock.h"
#include "tfm/train/run_vocab.h"
#include "tfm/train/session.h"

namespace fs = std::filesystem;

namespace tfm {

namespace {

std::atomic<int> g_stop_signal{0};

// The first SIGINT/SIGTERM asks the loop to stop; a second one ends the process at once (only
// async-signal-safe calls here: an atomic exchange, write and _exit).
extern "C" void request_stop(int signal) {
  if (g_stop_signal.exchange(signal) == 0) return;
  static const char kMessage[] =
      "tfm: error: training interrupted again: ended at once without saving; --resume continues "
      "from the last checkpoint\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(128 + signal);
}

// Installs SIGINT/SIGTERM handlers for the run's lifetime: the loop stops after the update in
// progress, or between two of its accumulated batches (abandoning it), saves a checkpoint and
// returns; a second signal ends the process.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    previous_int_ = std::signal(SIGINT, request_stop);
    previous_term_ = std::signal(SIGTERM, request_stop);
  }
  ~StopSignals() {
    std::signal(SIGINT, previous_int_);
    std::signal(SIGTERM, previous_term_);
  }

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

std::string clock_text(double seconds) {
  auto s = static_cast<int64_t>(seconds);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

void say(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}
using Say = std::function<void(const std::string&)>;

std::vector<std::string> read_lines(const fs::path& path) {
  LineReader reader(path);
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) lines.push_back(line);
  return lines;
}

// Appends one JSON object per line to metrics.jsonl.
class MetricsLog {
 public:
  explicit MetricsLog(const fs::path& path) : out_(path, std::ios::app) {
    TFM_CHECK(out_.good(), "{}: cannot open for writing: {}", path.string(), std::strerror(errno));
  }
  void write(const nlohmann::json& record) {
    out_ << record.dump() << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// A resumed run repeats the updates after its checkpoint: their records, written by the run that
// was stopped, are dropped from metrics.jsonl (so that each step appears once) and a "resume"
// record says how many.
void drop_replayed_metrics(const fs::path& path, int64_t resumed_step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_discarded() && record.is_object() &&
        record.value("step", int64_t{0}) > resumed_step) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  kept += nlohmann::json{{"type", "resume"}, {"step", resumed_step}, {"dropped", dropped}}.dump() +
          "\n";
  write_file_atomically(path, kept);
}

// Every validation pair must fit the model's positions (validation skips nothing): checked at
// start-up, naming the line, rather than failing at the first validation after hours of training.
void check_validation_lengths(const data::Corpus& valid, const TrainRecipe& recipe,
                              int64_t max_positions) {
  const bool lines_known = valid.stats().empty_skipped == 0;
  for (int64_t i = 0; i < valid.size(); ++i) {
    const int64_t longest = std::max(valid.source_length(i), valid.target_length(i) + 1);
    if (longest <= max_positions) continue;
    fail(
        "{}{}: the validation pair needs {} positions, more than the model's {} "
        "(model.max_positions): raise it, or remove the pair",
        valid.source_length(i) > max_positions ? recipe.valid_source : recipe.valid_target,
        lines_known ? fmt::format(":{}", i + 1) : fmt::format(" (pair {})", i + 1), longest,
        max_positions);
  }
}

// Updates in a row with a non-finite loss or gradient norm after which a run stops: one is an odd
// batch, several mean the weights or the learning rate are broken.
constexpr int64_t kMaxNonFiniteUpdatesInARow = 5;

// Budget-fitted schedules (optimizer.warmup_fraction, checkpoints.every_fraction), so that a short
// run is a small copy of a long one rather than its first minutes: the warmup ends and the
// averaged checkpoints start at the same share of the run whatever its budget.

// Updates timed to estimate the speed of a run with a time budget, after its first update (which
// also pays for start-up). Until then the recipe's warmup applies: its ramp starts lower than the
// fitted one, which changes the first few updates' learning rate by a negligible amount.
constexpr int64_t kWarmupProbeUpdates = 20;

int64_t fitted_warmup(const TrainRecipe& recipe, double expected_updates) {
  const auto fitted = static_cast<int64_t>(std::llround(recipe.warmup_fraction * expected_updates));
  return std::clamp<int64_t>(fitted, 1, recipe.warmup);
}

struct CheckpointInterval {
  int64_t steps = 0;     // 0: not by steps
  double minutes = 0.0;  // 0: not by time
};

// The recipe's intervals, shortened to checkpoints.every_fraction of its budgets.
CheckpointInterval checkpoint_interval(const TrainRecipe& recipe) {
  CheckpointInterval interval{recipe.checkpoint_every_steps, recipe.checkpoint_every_minutes};
  const double fraction = recipe.checkpoint_every_fraction;
  if (fraction <= 0) return interval;
  if (recipe.max_minutes > 0) {
    const double minutes = fraction * recipe.max_minutes;
    interval.minutes = interval.minutes > 0 ? std::min(interval.minutes, minutes) : minutes;
  }
  if (recipe.max_steps > 0) {
    const int64_t steps =
        std::max<int64_t>(1, std::llround(fraction * static_cast<double>(recipe.max_steps)));
    interval.steps = interval.steps > 0 ? std::min(interval.steps, steps) : steps;
  }
  return interval;
}

// Rank 0's view of the run directory: locked, damaged checkpoints set aside, and whether it holds
// checkpoints (a new run must not overwrite them).
bool prepare_run_directory(const TrainRecipe& recipe, const TrainRunOptions& run_options,
                           const Say& note) {
  const fs::path checkpoint_dir = fs::path(recipe.run_dir) / "checkpoints";
  // Found now, not at the first checkpoint after minutes of training: "checkpoints" must be a
  // folder (or not exist yet).
  std::error_code ec;
  const fs::file_status status = fs::status(checkpoint_dir, ec);
  TFM_CHECK(status.type() == fs::file_type::not_found || status.type() == fs::file_type::directory,
            "{}: {}; the run keeps its checkpoints in this folder", checkpoint_dir.string(),
            ec ? ec.message() : "exists and is not a directory");
  clean_checkpoint_folder(checkpoint_dir, note);
  const bool has_checkpoints = !list_checkpoints(checkpoint_dir).empty();
  if (!run_options.resume && has_checkpoints)
    fail("{} already holds checkpoints: continue it with --resume, or choose another run_dir",
         recipe.run_dir);
  return has_checkpoints;
}

// What must be equal on every rank, each part described as text.
std::vector<AgreementPart> agreement_parts(const TrainRecipe& recipe, const ModelConfig& config,
                                           const data::Vocabulary& vocab,
                                           const data::Batcher& batcher) {
  return {
      {"model configuration", config_to_json(config).dump()},
      {"vocabulary", vocab.hash()},
      {"training corpus or batching (data.*, training.seed)",
       fmt::format("{} {}", batcher.fingerprint(), recipe.accumulate)},
      {"optimizer, precision or limits",
       fmt::format("{} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", recipe.lr_scale, recipe.warmup,
                   recipe.warmup_fraction, recipe.beta1, recipe.beta2, recipe.eps, recipe.clip_norm,
                   recipe.precision, recipe.max_steps, recipe.max_epochs, recipe.max_minutes,
                   recipe.checkpoint_every_steps, recipe.checkpoint_every_minutes,
                   recipe.checkpoint_every_fraction, recipe.validate_every_steps)},
  };
}

// data.max_tokens and data.accumulate, `auto` resolved (train/batch_size.h), the same on every
// rank: from the memory each rank may use (the least of them; ranks on one host share its RAM),
// or, for a resumed run, from its newest checkpoint, so that the batches stay those of the run
// (an estimate from memory measured now would differ a little and change the batch plan).
BatchSize run_batch_size(const TrainRecipe& recipe, const ModelConfig& config, Device device,
                         DType precision, dist::Communicator& comm, bool has_checkpoints,
                         const Say& note) {
  BatchSizeRequest request;
  request.max_tokens = recipe.max_tokens;
  request.accumulate = recipe.accumulate;
  request.update_tokens = recipe.update_tokens;
  request.ranks = comm.size();
  request.safety_fraction = recipe.memory_fraction;
  const int64_t length = std::min(recipe.max_length, config.max_positions);
  request.min_tokens = 2 * length;
  std::string source;
  if (recipe.max_tokens == kAutoBatch) {
    const ops::MemoryAvailable seen = ops::memory_available(device);
    int64_t share = seen.bytes;
    if (device == Device::cpu && comm.size() > 1) share /= local_ranks();
    uint64_t least = static_cast<uint64_t>(std::max<int64_t>(share, 0));
    for (uint64_t other : comm.all_gather(least)) least = std::min(least, other);
    request.memory_bytes = static_cast<int64_t>(least);
    request.memory = estimate_training_memory(config, length, precision, device);
    source = seen.source + (comm.size() > 1 ? ", the least of the ranks' shares" : "");
    // The host's caching allocator would otherwise keep every size class at its own high-water
    // mark over batches of varying shapes, well past one step's peak (a GPU's returns its cache
    // when the device is full). What the allocator holds now is not in the memory seen.
    if (device == Device::cpu) {
      CachingAllocator& host = CachingAllocator::cpu();
      const AllocatorStats held = host.stats();
      host.set_cache_limit(
          held.bytes_in_use + held.bytes_cached +
          static_cast<size_t>(static_cast<double>(request.memory_bytes) * request.safety_fraction));
    }
  }
  const bool automatic = recipe.max_tokens == kAutoBatch || recipe.accumulate == kAutoBatch;
  if (!automatic && recipe.update_tokens == 0) {
    BatchSize given;
    given.max_tokens = recipe.max_tokens;
    given.accumulate = recipe.accumulate;
    given.ranks = comm.size();
    return given;
  }
  // Rank 0 decides (it alone reads the run directory) and tells the others.
  nlohmann::json decided;
  if (comm.rank() == 0) {
    BatchSize chosen = choose_batch_size(request);
    std::string line = describe_batch_size(
        request, chosen, source,
        fmt::format("{} layers, d_model {}, max_length {}, {} products", config.layers,
                    config.d_model, length, dtype_name(precision)));
    const fs::path checkpoints = fs::path(recipe.run_dir) / "checkpoints";
    if (automatic && has_checkpoints) {
      const std::vector<fs::path> saved = list_checkpoints(checkpoints);
      // A damaged state.json gives no recorded batch size here; the resume then reports it.
      nlohmann::json extra;
      try {
        extra = load_training_state(saved.back()).extra;
      } catch (const Error&) {
      }
      if (extra.is_object() && extra.contains("max_tokens") && extra.contains("accumulate")) {
        const BatchSize fresh = chosen;
        if (recipe.max_tokens == kAutoBatch) chosen.max_tokens = extra["max_tokens"].get<int64_t>();
        if (recipe.accumulate == kAutoBatch) chosen.accumulate = extra["accumulate"].get<int64_t>();
        if (chosen.max_tokens != fresh.max_tokens || chosen.accumulate != fresh.accumulate)
          line += fmt::format(
              "; resuming: max_tokens {} x accumulate {} as {} was trained{}", chosen.max_tokens,
              chosen.accumulate, saved.back().filename().string(),
              fresh.memory_tokens > 0 && fresh.memory_tokens < chosen.max_tokens
                  ? fmt::format(" (more than the {} tokens the memory holds by the estimate)",
                                fresh.memory_tokens)
                  : "");
      }
    }
    note(line);
    decided = {{"max_tokens", chosen.max_tokens}, {"accumulate", chosen.accumulate}};
  }
  if (comm.size() > 1) decided = nlohmann::json::parse(broadcast_text(comm, decided.dump()));
  BatchSize result;
  result.max_tokens = decided["max_tokens"].get<int64_t>();
  result.accumulate = decided["accumulate"].get<int64_t>();
  result.ranks = comm.size();
  return result;
}

}  // namespace

TrainSummary run_training(const TrainRecipe& given_recipe, const TrainRunOptions& run_options) {
  validate(given_recipe);
  // data.max_tokens and data.accumulate become numbers below (auto).
  TrainRecipe recipe = given_recipe;
  // A GPU that cannot be used is reported before the run directory is touched.
  ops::use_device(ops::parse_device(recipe.device));
  std::unique_ptr<dist::Communicator> alone;
  if (run_options.communicator == nullptr) alone = dist::make_single_process();
  dist::Communicator& comm = run_options.communicator ? *run_options.communicator : *alone;
  const int rank = comm.rank(), ranks = comm.size();
  // Rank 0 alone speaks, validates and writes the run directory; every rank trains.
  const bool lead = rank == 0;
  const Say note = lead ? Say(say) : Say([](const std::string&) {});
  int threads = recipe.threads;
  if (ranks > 1 && threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr)
    threads = default_threads_per_rank();
  set_num_threads(threads);
  const fs::path run_dir = recipe.run_dir;
  const fs::path checkpoint_dir = run_dir / "checkpoints";
  std::optional<RunDirectoryLock> lock;
  bool has_checkpoints = false;
  std::optional<data::Vocabulary> rank0_vocab;
  if (lead) {
    lock.emplace(run_dir);
    has_checkpoints = prepare_run_directory(recipe, run_options, note);
    rank0_vocab.emplace(prepare_run_vocabulary(recipe, run_dir, has_checkpoints, note));
  }
  data::Vocabulary vocab = share_vocabulary(comm, std::move(rank0_vocab));
  const ModelConfig config = recipe.model_config(vocab.size());
  data::CorpusOptions corpus_options;
  // Training pairs longer than the model's positions are skipped and counted, as over max_length.
  corpus_options.max_length = recipe.max_length > 0
                                  ? std::min(recipe.max_length, config.max_positions)
                                  : config.max_positions;
  corpus_options.skip_empty_lines = recipe.skip_empty_lines;
  corpus_options.skip_invalid_lines = recipe.skip_invalid_lines;
  corpus_options.cache_dir = run_dir / "cache";
  corpus_options.progress = note;
  // Rank 0 reads (and caches) the corpus first; the others then find its cache where they share
  // the file system.
  std::optional<data::Corpus> train_corpus;
  auto load_train = [&] {
    train_corpus.emplace(
        data::Corpus::load(recipe.train_source, recipe.train_target, vocab, corpus_options));
  };
  if (lead) load_train();
  comm.barrier();
  if (!lead) load_train();
  const data::Corpus& train = *train_corpus;
  note("train: " + train.stats().summary());
  data::Corpus valid;
  std::vector<std::string> valid_sources, valid_references;
  const bool has_valid = !recipe.valid_source.empty() && lead;
  if (has_valid) {
    data::CorpusOptions valid_options = corpus_options;
    valid_options.max_length = 0;  // score every sentence
    valid = data::Corpus::load(recipe.valid_source, recipe.valid_target, vocab, valid_options);
    note("valid: " + valid.stats().summary());
    check_validation_lengths(valid, recipe, config.max_positions);
    valid_sources = read_lines(recipe.valid_source);
    valid_references = read_lines(recipe.valid_target);
    if (recipe.valid_max_sentences > 0 &&
        static_cast<int64_t>(valid_sources.size()) > recipe.valid_max_sentences) {
      valid_sources.resize(static_cast<size_t>(recipe.valid_max_sentences));
      valid_references.resize(static_cast<size_t>(recipe.valid_max_sentences));
    }
  }

  // The batch size, before the session allocates the model: the memory seen is what the model,
  // Adam and the batches will share.
  const Device device = ops::parse_device(recipe.device);
  const DType precision = ops::parse_precision(recipe.precision, "training.precision");
  {
    const BatchSize batch_size =
        run_batch_size(recipe, config, device, precision, comm, has_checkpoints, note);
    recipe.max_tokens = batch_size.max_tokens;
    recipe.accumulate = batch_size.accumulate;
  }

  SessionOptions session_options;
  session_options.schedule = NoamSchedule{config.d_model, recipe.warmup, recipe.lr_scale};
  session_options.adam = AdamOptions{recipe.beta1, recipe.beta2, recipe.eps};
  session_options.clip_norm = recipe.clip_norm;
  session_options.seed = recipe.seed;
  session_options.precision = precision;
  session_options.communicator = &comm;
  session_options.bucket_bytes = static_cast<int64_t>(recipe.allreduce_bucket_mb * (1 << 20));
  session_options.device = device;
  TrainingSession session(config, session_options);

  data::BatcherOptions batch_options;
  batch_options.max_tokens = recipe.max_tokens;
  batch_options.window_batches = recipe.shuffle_window;
  data::Batcher batcher(train, batch_options, recipe.seed);
  if (batcher.skipped_pairs() > 0)
    note(fmt::format("{} pairs exceed the batch budget alone and are skipped",
                     batcher.skipped_pairs()));
  check_ranks_agree(comm, agreement_parts(recipe, config, vocab, batcher));

  double elapsed_before = 0;
  // The updates by the products they ran in ({"f32": 900, "bf16": 600}), kept in every checkpoint
  // so that a run resumed on another machine (where `auto` may choose otherwise) says so.
  nlohmann::json steps_by_products = nlohmann::json::object();
  int64_t first_step = 0;
  TrainSummary summary;
  // No budget-fitted warmup to wait for (optimizer.warmup_fraction off, or already known).
  bool warmup_fitted = recipe.warmup_fraction <= 0;
  if (run_options.resume && lead) {
    auto checkpoint = load_latest_checkpoint(checkpoint_dir, note);
    if (checkpoint) {
      check_checkpoint_vocabulary(vocab, checkpoint->dir);
      session.restore(*checkpoint);
      const TrainingState& s = checkpoint->state;
      uint64_t fingerprint = s.extra.value("batcher_fingerprint", uint64_t{0});
      TFM_CHECK(fingerprint == batcher.fingerprint(),
                "{}: the corpus, batching options or seed changed since this checkpoint; resume "
                "needs the same data and recipe",
                checkpoint->dir.string());
      batcher.restore({s.epoch, s.batch_in_epoch});
      elapsed_before = s.extra.value("elapsed_s", 0.0);
      first_step = s.step;
      if (s.extra.contains("steps_by_products") && s.extra["steps_by_products"].is_object())
        steps_by_products = s.extra["steps_by_products"];
      else if (s.step > 0)
        steps_by_products["unrecorded"] = s.step;  // a checkpoint written before they were kept
      if (recipe.warmup_fraction > 0 && s.extra.contains("fitted_warmup")) {
        session.set_schedule(session_options.schedule.with_warmup_at_same_peak(
            s.extra.value("fitted_warmup", recipe.warmup)));
        warmup_fitted = true;
      }
      note(fmt::format("resuming from {} (step {}, epoch {}, batch {})", checkpoint->dir.string(),
                       s.step, s.epoch + 1, s.batch_in_epoch));
      drop_replayed_metrics(run_dir / "metrics.jsonl", session.step());
      summary.last_checkpoint = checkpoint->dir.string();
    } else {
      note("no checkpoint to resume from: starting a new run");
    }
  }
  if (ranks > 1) {
    // Every rank starts where rank 0 stands: its weights, Adam's moments and step, the data
    // position (global: the same for any number of ranks) and the schedule.
    session.broadcast_state(0);
    const nlohmann::json where = nlohmann::json::parse(
        broadcast_text(comm, nlohmann::json{{"epoch", batcher.state().epoch},
                                            {"batch", batcher.state().batch},
                                            {"elapsed_s", elapsed_before},
                                            {"warmup", session.schedule().warmup},
                                            {"warmup_fitted", warmup_fitted},
                                            {"last_checkpoint", summary.last_checkpoint}}
                                 .dump()));
    batcher.restore({where["epoch"].get<int64_t>(), where["batch"].get<int64_t>()});
    elapsed_before = where["elapsed_s"].get<double>();
    session.set_schedule(
        session_options.schedule.with_warmup_at_same_peak(where["warmup"].get<int64_t>()));
    warmup_fitted = where["warmup_fitted"].get<bool>();
    summary.last_checkpoint = where["last_checkpoint"].get<std::string>();
    check_ranks_agree(comm, {{"initial weights", std::to_string(session.parameters_checksum())}});
  }
  note(fmt::format(
      "model: {} layers, d_model {}, {:.2f} M parameters; batches of {} tokens x {}{}; "
      "{} products{} on {}",
      config.layers, config.d_model, static_cast<double>(parameter_count(config)) / 1e6,
      recipe.max_tokens, recipe.accumulate, ranks > 1 ? fmt::format(" x {} ranks", ranks) : "",
      dtype_name(session_options.precision),
      ops::describe_products(session_options.precision, session_options.device),
      ops::describe_device(session_options.device)));
  if (ranks > 1)
    note(fmt::format(
        "{}; {} threads per rank; gradients ({:.1f} MiB) all-reduced in {} bucket{} "
        "of at most about {} MiB",
        comm.describe(), num_threads(),
        static_cast<double>(session.all_reduce_stats().bytes) / (1 << 20),
        session.all_reduce_stats().buckets, session.all_reduce_stats().buckets == 1 ? "" : "s",
        recipe.allreduce_bucket_mb));

  auto fit_warmup = [&](double expected_updates) {
    session.set_schedule(
        session_options.schedule.with_warmup_at_same_peak(fitted_warmup(recipe, expected_updates)));
    warmup_fitted = true;
    note(
        fmt::format("warmup: {} updates ({:g} of the about {:.0f} updates of the budget, at most "
                    "{}) to the peak learning rate {:.3g}",
                    session.schedule().warmup, recipe.warmup_fraction, expected_updates,
                    recipe.warmup, session.schedule().peak()));
  };
  if (recipe.warmup_fraction > 0 && !warmup_fitted) {
    if (recipe.max_minutes <= 0 && recipe.max_steps > 0) {
      fit_warmup(static_cast<double>(recipe.max_steps));
    } else if (recipe.max_minutes <= 0) {
      note(
          fmt::format("optimizer.warmup_fraction needs a budget (training.max_steps or "
                      "max_minutes): warmup {}",
                      recipe.warmup));
      warmup_fitted = true;
    }
  }
  // The speed of the updates after this process's first one, for a warmup fitted to a time budget.
  int64_t probe_start_step = -1;
  double probe_start_seconds = 0;
  const CheckpointInterval checkpoint_every = checkpoint_interval(recipe);
  if (recipe.checkpoint_every_fraction > 0)
    note(fmt::format(
        "checkpoints every {}{}{}, keeping the last {}",
        checkpoint_every.minutes > 0 ? fmt::format("{:.2f} minutes", checkpoint_every.minutes) : "",
        checkpoint_every.minutes > 0 && checkpoint_every.steps > 0 ? " or " : "",
        checkpoint_every.steps > 0 ? fmt::format("{} updates", checkpoint_every.steps) : "",
        recipe.keep_checkpoints));

  std::optional<MetricsLog> metrics;
  if (lead) metrics.emplace(run_dir / "metrics.jsonl");
  auto write_metrics = [&](const nlohmann::json& record) {
    if (!metrics) return;
    metrics->write(record);
    if (run_options.on_record) run_options.on_record(record);
  };
  StopSignals signals;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto local_elapsed = [&] {
    return elapsed_before + std::chrono::duration<double>(clock::now() - start).count();
  };
  // With several ranks, what every decision depends on is agreed after each update: rank 0's
  // clock (time limits, checkpoint times, the fitted warmup) and whether any rank was asked to
  // stop (mpirun forwards a signal to each rank at a slightly different moment).
  double agreed_elapsed = local_elapsed();
  bool agreed_stop = false;
  auto elapsed = [&] { return ranks > 1 ? agreed_elapsed : local_elapsed(); };
  auto stop_requested = [&] { return ranks > 1 ? agreed_stop : g_stop_signal != 0; };
  auto agree = [&] {
    if (ranks == 1) return;
    double values[2] = {g_stop_signal != 0 ? 1.0 : 0.0, lead ? local_elapsed() : 0.0};
    comm.all_reduce_sum(std::span<double>(values));
    agreed_stop = values[0] > 0;
    agreed_elapsed = values[1];
  };
  agree();
  double last_checkpoint_time = elapsed();
  int64_t last_checkpoint_step = session.step();
  // Known on every rank (only rank 0 knows the checkpoint's path).
  bool has_checkpoint = !summary.last_checkpoint.empty();

  auto save = [&]() {
    // Every rank's weights must still be rank 0's: a difference would be saved as if it were not.
    if (ranks > 1)
      check_ranks_agree(
          comm, {{"weights (the ranks diverged)", std::to_string(session.parameters_checksum())}});
    last_checkpoint_time = elapsed();
    last_checkpoint_step = session.step();
    has_checkpoint = true;
    if (!lead) return;
    for (const auto& [name, tensor] : session.model().named_parameters())
      TFM_CHECK(first_non_finite(tensor) < 0,
                "step {}: parameter '{}' holds a non-finite value: not saving it; the last "
                "checkpoint is {}",
                session.step(), name,
                summary.last_checkpoint.empty() ? "none" : summary.last_checkpoint);
    TrainingState state;
    state.step = session.step();
    state.epoch = batcher.state().epoch;
    state.batch_in_epoch = batcher.state().batch;
    state.seed = recipe.seed;
    // max_tokens and accumulate: what a resume with `auto` keeps (run_batch_size).
    state.extra = {{"elapsed_s", elapsed()},
                   {"batcher_fingerprint", batcher.fingerprint()},
                   {"max_tokens", recipe.max_tokens},
                   {"accumulate", recipe.accumulate}};
    if (recipe.warmup_fraction > 0 && warmup_fitted)
      state.extra["fitted_warmup"] = session.schedule().warmup;
    nlohmann::json by_products = steps_by_products;
    const std::string products(dtype_name(session_options.precision));
    by_products[products] = by_products.value(products, int64_t{0}) + session.step() - first_step;
    state.extra["steps_by_products"] = by_products;
    fs::path dir = save_checkpoint(checkpoint_dir, config, session.model().named_parameters(),
                                   session.optimizer(), state, {vocab.path()});
    prune_checkpoints(checkpoint_dir, static_cast<int>(recipe.keep_checkpoints));
    summary.last_checkpoint = dir.string();
  };

  int64_t last_validation_step = -1;
  auto run_validation = [&]() {
    if (!has_valid) return;
    last_validation_step = session.step();
    std::vector<nn::Batch> batches;
    data::BatcherOptions eval_options;
    eval_options.max_tokens = std::max<int64_t>(recipe.max_tokens, 1);
    eval_options.shuffle = false;
    data::Batcher eval_batcher(valid, eval_options, 0);
    for (const auto& plan : eval_batcher.epoch_plan(0))
      batches.push_back(model_batch(eval_batcher.make_batch(plan)));
    EvalResult result = session.evaluate(batches);
    summary.last_valid_loss = result.loss;
    nlohmann::json record = {
        {"type", "valid"},       {"step", session.step()}, {"epoch", batcher.state().epoch + 1},
        {"loss", result.loss},   {"nll", result.nll},      {"perplexity", result.perplexity()},
        {"elapsed_s", elapsed()}};
    std::string line = fmt::format("valid | step {} | loss {:.4f} | ppl {:.2f}", session.step(),
                                   result.loss, result.perplexity());
    if (recipe.validate_bleu && run_options.bleu) {
      // A parsing model's score is bracketing F1 (eval/validation_bleu.h).
      const bool parsing = session.model().config().task == "parsing";
      double score = run_options.bleu(session.model(), vocab, valid_sources, valid_references);
      summary.last_valid_bleu = score;
      record[parsing ? "f1" : "bleu"] = score;
      line += fmt::format(" | {} {:.2f} (greedy)", parsing ? "F1" : "BLEU", score);
    }
    write_metrics(record);
    note(line);
  };

  // Progress accumulated between two log lines.
  double log_loss = 0, log_nll = 0;
  int64_t log_target = 0, log_tokens = 0, log_updates = 0;
  auto log_start = clock::now();

  // Epochs done: the batcher stays on an epoch's end until the next batch is asked for.
  auto completed_epochs = [&] {
    return batcher.state().epoch + (batcher.state().batch >= batcher.batches_in_epoch() ? 1 : 0);
  };
  auto limits_reached = [&] {
    if (recipe.max_steps > 0 && session.step() >= recipe.max_steps) return true;
    if (recipe.max_epochs > 0 && completed_epochs() >= recipe.max_epochs) return true;
    if (recipe.max_minutes > 0 && elapsed() >= recipe.max_minutes * 60) return true;
    return false;
  };

  int64_t non_finite_in_a_row = 0;
  while (!limits_reached() && !stop_requested()) {
    const int64_t epochs_before = completed_epochs();
    const data::Batcher::State position_before = batcher.state();
    // The update's accumulate x ranks batches, in the batcher's (global) order: rank r computes
    // those from r x accumulate on, as one process with accumulate x ranks would.
    std::vector<nn::Batch> batches;
    for (int64_t i = 0; i < recipe.accumulate * ranks; ++i) {
      if (i / recipe.accumulate == rank)
        batches.push_back(model_batch(batcher.next()));
      else
        batcher.skip();
    }
    // A signal during the accumulation abandons the update: nothing was applied, and the data
    // position goes back to its start, so the checkpoint saved below is exactly the last update.
    auto stop_between_batches = [&] {
      if (ranks == 1) return g_stop_signal != 0;
      double asked = g_stop_signal != 0 ? 1.0 : 0.0;
      comm.all_reduce_sum(std::span<double>(&asked, 1));
      return asked > 0;
    };
    UpdateResult update = session.update(batches, rank * recipe.accumulate, stop_between_batches);
    if (update.abandoned) {
      batcher.restore(position_before);
      agreed_stop = true;
      note(fmt::format("step {}: interrupted after {} of its {} batches: the update is dropped",
                       session.step() + 1, update.batches_done, recipe.accumulate));
      break;
    }
    agree();
    if (update.skipped) {
      ++non_finite_in_a_row;
      ++summary.skipped_updates;
      note(
          fmt::format("step {}: loss {} and gradient norm {} are not finite: update skipped ({} "
                      "in a row)",
                      session.step() + 1, update.loss, update.grad_norm, non_finite_in_a_row));
      write_metrics({{"type", "skipped"},
                     {"step", session.step() + 1},
                     {"loss", fmt::format("{}", update.loss)},
                     {"grad_norm", fmt::format("{}", update.grad_norm)},
                     {"elapsed_s", elapsed()}});
      TFM_CHECK(non_finite_in_a_row < kMaxNonFiniteUpdatesInARow,
                "step {}: the loss or gradient norm was not finite in {} updates in a row (is "
                "optimizer.lr_scale {} too high?); stopped without saving; the last checkpoint is "
                "{}",
                session.step() + 1, non_finite_in_a_row, recipe.lr_scale,
                summary.last_checkpoint.empty() ? "none" : summary.last_checkpoint);
      continue;
    }
    non_finite_in_a_row = 0;
    log_loss += update.loss * static_cast<double>(update.target_tokens);
    log_nll += update.nll * static_cast<double>(update.target_tokens);
    log_target += update.target_tokens;
    log_tokens += update.target_tokens + update.source_tokens;
    ++log_updates;

    if (!warmup_fitted) {
      if (probe_start_step < 0) {
        probe_start_step = session.step();
        probe_start_seconds = elapsed();
      } else if (session.step() - probe_start_step >= kWarmupProbeUpdates) {
        const double per_update = (elapsed() - probe_start_seconds) /
                                  static_cast<double>(session.step() - probe_start_step);
        double expected = static_cast<double>(session.step()) +
                          std::max(0.0, recipe.max_minutes * 60 - elapsed()) / per_update;
        if (recipe.max_steps > 0)
          expected = std::min(expected, static_cast<double>(recipe.max_steps));
        fit_warmup(expected);
      }
    }

    if (session.step() % recipe.log_every == 0) {
      double seconds = std::chrono::duration<double>(clock::now() - log_start).count();
      double loss = log_loss / static_cast<double>(log_target);
      double ppl = std::exp(log_nll / static_cast<double>(log_target));
      double per_step = seconds / static_cast<double>(log_updates);
      double remaining = -1;
      if (recipe.max_steps > 0)
        remaining = per_step * static_cast<double>(recipe.max_steps - session.step());
      if (recipe.max_minutes > 0) {
        double by_time = recipe.max_minutes * 60 - elapsed();
        remaining = remaining < 0 ? by_time : std::min(remaining, by_time);
      }
      double epoch_fraction = static_cast<double>(batcher.state().batch) /
                              static_cast<double>(std::max<int64_t>(batcher.batches_in_epoch(), 1));
      note(fmt::format(
          "step {} | epoch {} ({:.0f}%) | loss {:.4f} | ppl {:.2f} | lr {:.3g} | {:.0f} tok/s | "
          "{} elapsed{}",
          session.step(), batcher.state().epoch + 1, 100 * epoch_fraction, loss, ppl,
          update.learning_rate, static_cast<double>(log_tokens) / seconds, clock_text(elapsed()),
          remaining >= 0 ? " | " + clock_text(remaining) + " left" : ""));
      write_metrics({{"type", "train"},
                     {"step", session.step()},
                     {"epoch", batcher.state().epoch + 1},
                     {"loss", loss},
                     {"perplexity", ppl},
                     {"lr", update.learning_rate},
                     {"grad_norm", update.grad_norm},
                     {"tokens_per_second", static_cast<double>(log_tokens) / seconds},
                     {"elapsed_s", elapsed()}});
      log_loss = log_nll = 0;
      log_target = log_tokens = log_updates = 0;
      log_start = clock::now();
    }

    const bool epoch_ended = completed_epochs() != epochs_before;
    summary.epochs_completed = completed_epochs();
    if ((recipe.validate_every_steps > 0 && session.step() % recipe.validate_every_steps == 0) ||
        (recipe.validate_every_steps == 0 && epoch_ended))
      run_validation();
    const bool by_steps = checkpoint_every.steps > 0 &&
                          session.step() - last_checkpoint_step >= checkpoint_every.steps;
    const bool by_time = checkpoint_every.minutes > 0 &&
                         elapsed() - last_checkpoint_time >= checkpoint_every.minutes * 60;
    if (by_steps || by_time) save();
  }

  summary.interrupted = stop_requested();
  if (summary.interrupted) note("interrupted: saving a checkpoint");
  if (session.step() != last_checkpoint_step || !has_checkpoint) save();
  if (!summary.interrupted && last_validation_step != session.step()) run_validation();
  summary.steps = session.step();
  summary.elapsed_seconds = elapsed();
  note(fmt::format("{} at step {} after {}; last checkpoint {}",
                   summary.interrupted ? "stopped" : "done", summary.steps,
                   clock_text(summary.elapsed_seconds), summary.last_checkpoint));
  return summary;
}

}  // namespace tfm
