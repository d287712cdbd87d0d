#include "tfm/sweep/sweep.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/data/vocab.h"
#include "tfm/dist/communicator.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/checksum.h"
#include "tfm/model/table3.h"
#include "tfm/sweep/evaluation.h"
#include "tfm/train.h"
#include "tfm/train/checkpoint.h"
#include "tfm/train/recipe.h"
#include "tfm/train/run_lock.h"
#include "tfm/train/run_vocab.h"

namespace fs = std::filesystem;

namespace tfm::internal::sweep {

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

// "K/N" -> {K, N}; no shard: {0, 1}.
std::pair<int64_t, int64_t> parse_shard(const std::string& text) {
  if (text.empty()) return {0, 1};
  long long k = -1, n = -1;
  char end = 0;
  const int read = std::sscanf(text.c_str(), "%lld/%lld%c", &k, &n, &end);
  TFM_CHECK(read == 2 && n >= 1 && k >= 0 && k < n,
            "--shard '{}': expected K/N with 0 <= K < N (this process runs the rows i with i % N "
            "== K)",
            text);
  return {k, n};
}

std::vector<Table3Result> finished_results(const fs::path& out) {
  std::vector<Table3Result> results;
  for (const Table3Row& row : table3_rows()) {
    const fs::path file = out / std::string(row.name) / "result.json";
    if (!fs::exists(file)) continue;
    std::ifstream in(file);
    try {
      results.push_back(table3_result_from_json(nlohmann::json::parse(in)));
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not valid JSON: {}", file.string(), e.what());
    } catch (const Error& e) {
      fail("{}: {}", file.string(), e.what());
    }
  }
  return results;
}

// table.md and table.csv from every finished row (also those other processes finished); returns
// table.md's text.
std::string write_table(const fs::path& out, const std::vector<std::string>& selected) {
  const std::vector<Table3Result> results = finished_results(out);
  std::string missing;
  for (const std::string& row : selected) {
    bool done = false;
    for (const Table3Result& r : results) done = done || r.row == row;
    if (!done) missing += (missing.empty() ? "" : ", ") + row;
  }
  std::string markdown = table3_markdown(results);
  if (!missing.empty()) markdown += "\nNot done yet: " + missing + ".\n";
  write_file_atomically(out / "table.md", markdown);
  write_file_atomically(out / "table.csv", table3_csv(results));
  return markdown;
}

// The settings a sweep directory was started with; a later run must ask for the same.
nlohmann::ordered_json settings(const SweepOptions& o, const TrainRecipe& recipe, int64_t average) {
  nlohmann::ordered_json budget = o.budget_steps >= 0
                                      ? nlohmann::ordered_json{{"steps", o.budget_steps}}
                                      : nlohmann::ordered_json{{"minutes", o.budget_minutes}};
  return {{"recipe", fs::absolute(o.config).lexically_normal().string()},
          {"recipe_crc32", crc32_hex(crc32_of_file(o.config))},
          {"overrides", o.overrides},
          {"budget", budget},
          {"average", average},
          {"valid_source", recipe.valid_source},
          {"valid_sentences", o.valid_sentences},
          {"precision", o.precision},
          {"beam_size", o.beam_size},
          {"alpha", o.alpha}};
}

void check_settings(const fs::path& out, const nlohmann::ordered_json& wanted) {
  const fs::path file = out / "sweep.json";
  if (fs::exists(file)) {
    std::ifstream in(file);
    nlohmann::ordered_json recorded;
    try {
      recorded = nlohmann::ordered_json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not valid JSON: {}", file.string(), e.what());
    }
    for (const auto& [key, value] : wanted.items())
      TFM_CHECK(recorded.contains(key) && recorded[key] == value,
                "{} was started with {} {}, this run asks for {}: use the same settings to "
                "continue it, or another --out",
                out.string(), key, recorded.contains(key) ? recorded[key].dump() : "none",
                value.dump());
    return;
  }
  write_file_atomically(file, wanted.dump(2) + "\n");
}

// The vocabulary every row shares: the recipe's data.vocab, or one learned once into out/vocab
// (under a lock, so that sweep processes started together learn it once).
fs::path shared_vocabulary(const TrainRecipe& recipe, const fs::path& out,
                           const std::vector<std::string>& rows, const Say& say) {
  if (!recipe.vocab.empty()) return recipe.vocab;
  const fs::path dir = out / "vocab";
  const RunDirectoryLock lock(dir, LockWait::yes);  // waits for a sweep process learning it now
  bool has_checkpoints = false;
  for (const std::string& row : rows)
    has_checkpoints =
        has_checkpoints || !list_checkpoints(out / row / "run" / "checkpoints").empty();
  prepare_run_vocabulary(recipe, dir, has_checkpoints, say);
  return fs::absolute(dir / "vocab.model");
}

std::string rows_text(int64_t count) {
  return fmt::format("{} row{}", count, count == 1 ? "" : "s");
}

std::string number_text(double value) {
  return fmt::format("{}", value);
}

// The `--set` assignments that make a recipe's model into `config`.
std::vector<std::string> model_overrides(const ModelConfig& config) {
  return {"model.layers=" + std::to_string(config.layers),
          "model.d_model=" + std::to_string(config.d_model),
          "model.d_ff=" + std::to_string(config.d_ff),
          "model.heads=" + std::to_string(config.heads),
          "model.d_k=" + std::to_string(config.d_k),
          "model.d_v=" + std::to_string(config.d_v),
          "model.dropout=" + number_text(config.dropout),
          "model.label_smoothing=" + number_text(config.label_smoothing),
          "model.positional=" + config.positional};
}

struct RowPlan {
  std::string row;
  ModelConfig config;
};

// Trains, averages and evaluates one row; false when training was interrupted.
bool run_row(const SweepOptions& o, const TrainRecipe& recipe, const fs::path& vocab,
             int64_t average, const RowPlan& plan, const fs::path& out) {
  const fs::path dir = out / plan.row;
  const fs::path run = dir / "run";
  TrainingOptions training;
  training.recipe = o.config;
  training.overrides = o.overrides;
  for (const std::string& assignment : model_overrides(plan.config))
    training.overrides.push_back(assignment);
  training.overrides.push_back("data.vocab=" + vocab.string());
  // The sweep evaluates the averaged model itself; greedy BLEU during training would only spend
  // the budget (the validation loss stays: metrics.jsonl keeps the curve).
  training.overrides.push_back("validation.bleu=false");
  training.run_dir = run;
  training.max_steps = o.budget_steps >= 0 ? o.budget_steps : 0;
  training.max_minutes = o.budget_minutes >= 0 ? o.budget_minutes : 0;
  training.threads = o.threads;
  if (!o.device.empty()) training.device = tfm::parse_device(o.device);
  training.resume = true;  // a row killed before continues from its newest checkpoint
  if (tfm::train(training).interrupted) return false;

  const std::vector<fs::path> checkpoints = newest_checkpoints(run / "checkpoints", average);
  const TrainingState state = load_training_state(checkpoints.back());
  average_models(checkpoints, dir / "averaged");

  SweepEvaluation evaluation;
  evaluation.model_dir = dir / "averaged";
  evaluation.expected = plan.config;
  evaluation.valid_source = recipe.valid_source;
  evaluation.valid_target = recipe.valid_target;
  evaluation.max_bleu_sentences = o.valid_sentences;
  evaluation.beam_size = o.beam_size;
  evaluation.alpha = o.alpha;
  evaluation.precision = o.precision;
  evaluation.device = o.device.empty() ? recipe.device : o.device;
  evaluation.threads = o.threads >= 0 ? o.threads : recipe.threads;
  evaluation.hypotheses = dir / "valid.hyp";
  Table3Result result = evaluate_sweep_row(evaluation);
  result.row = plan.row;
  result.train_steps = state.step;
  result.train_seconds = state.extra.value("elapsed_s", 0.0);
  result.train_products =
      train_products_text(state.extra.value("steps_by_products", nlohmann::json()));
  for (const fs::path& checkpoint : checkpoints)
    result.averaged.push_back(checkpoint.filename().string());
  write_file_atomically(dir / "result.json", table3_result_to_json(result).dump(2) + "\n");
  o.say(
      fmt::format("{} done: {} steps ({} products) in {}, PPL {:.2f}, BLEU {:.2f}, {:.2f} M "
                  "parameters (evaluation {:.0f} s)",
                  plan.row, result.train_steps,
                  result.train_products.empty() ? "unrecorded" : result.train_products,
                  clock_text(result.train_seconds), result.perplexity, result.bleu,
                  static_cast<double>(result.parameters) / 1e6, result.eval_seconds));
  return true;
}

std::string describe(const ModelConfig& c) {
  return fmt::format(
      "N {}, d_model {}, d_ff {}, h {}, d_k {}, d_v {}, P_drop {:g}, eps_ls {:g}, {}", c.layers,
      c.d_model, c.d_ff, c.heads, c.d_k, c.d_v, c.dropout, c.label_smoothing, c.positional);
}

// The recipe with the sweep's overrides, validated; it must have a validation set.
TrainRecipe sweep_recipe(const SweepOptions& o) {
  TrainRecipe recipe = load_recipe(o.config);
  for (const std::string& assignment : o.overrides) apply_override(recipe, assignment);
  validate(recipe);
  TFM_CHECK(!recipe.valid_source.empty() && !recipe.valid_target.empty(),
            "{}: the recipe has no validation set (data.valid_source, data.valid_target); the "
            "sweep measures every row on it",
            o.config);
  return recipe;
}

}  // namespace

std::string run_sweep(const SweepOptions& o) {
  TFM_CHECK(dist::launch_info().size == 1,
            "tfm sweep runs as one process per shard, not under mpirun: start one `tfm sweep "
            "--shard K/N` per process (docs/TABLE3.md)");
  const fs::path out = o.out;
  const std::vector<std::string> selected = select_table3_rows(o.rows);
  if (o.table_only) {
    TFM_CHECK(fs::is_directory(out), "{}: no such sweep directory", out.string());
    return write_table(out, selected);
  }
  TFM_CHECK(!o.config.empty(), "tfm sweep needs a recipe: -c recipe.yaml");
  TFM_CHECK((o.budget_minutes >= 0) != (o.budget_steps >= 0),
            "give one budget per row: --budget-minutes M or --budget-steps S");
  const auto [shard, shards] = parse_shard(o.shard);

  const TrainRecipe recipe = sweep_recipe(o);
  const int64_t average = o.average > 0 ? o.average : recipe.keep_checkpoints;
  TFM_CHECK(average <= recipe.keep_checkpoints,
            "--average {} needs that many checkpoints, but the recipe keeps {} "
            "(checkpoints.keep)",
            average, recipe.keep_checkpoints);

  // Every row's configuration first: a row that cannot be scaled stops the sweep before any
  // training.
  std::vector<RowPlan> plans;
  ModelConfig recipe_model = recipe.model_config(recipe.vocab_size);
  for (size_t i = 0; i < selected.size(); ++i)
    if (static_cast<int64_t>(i) % shards == shard)
      plans.push_back({selected[i], scaled_row(recipe_model, selected[i])});

  fs::create_directories(out);
  check_settings(out, settings(o, recipe, average));
  const fs::path vocab = shared_vocabulary(recipe, out, selected, o.say);
  const int64_t vocab_size = data::Vocabulary(vocab).size();
  recipe_model = recipe.model_config(vocab_size);
  for (RowPlan& plan : plans) plan.config = scaled_row(recipe_model, plan.row);

  int64_t to_run = 0;
  for (const RowPlan& plan : plans)
    if (!fs::exists(out / plan.row / "result.json")) ++to_run;
  o.say(fmt::format(
      "{}{} in {}, {} to run; budget {} per row", rows_text(static_cast<int64_t>(plans.size())),
      shards > 1 ? fmt::format(" (shard {} of {})", shard, shards) : "", out.string(), to_run,
      o.budget_steps >= 0 ? fmt::format("{} steps", o.budget_steps)
                          : fmt::format("{:g} minutes", o.budget_minutes)));

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int64_t ran = 0;
  for (const RowPlan& plan : plans) {
    const fs::path dir = out / plan.row;
    if (fs::exists(dir / "result.json")) {
      o.say(fmt::format("skipping {}: done", plan.row));
      continue;
    }
    if (o.max_rows > 0 && ran >= o.max_rows) {
      o.say(fmt::format("stopping after {} (--max-rows); run again to continue", rows_text(ran)));
      break;
    }
    std::optional<RunDirectoryLock> lock;
    try {
      lock.emplace(dir);  // dir/.lock: one process per row
    } catch (const Error& e) {
      o.say(fmt::format("skipping {}: {}", plan.row, e.what()));
      continue;
    }
    o.say(fmt::format("[{}/{}] {} ({}): {}", ran + 1, to_run, plan.row, table3_row(plan.row).change,
                      describe(plan.config)));
    if (!run_row(o, recipe, vocab, average, plan, out))
      throw Error(fmt::format("sweep interrupted in row {}; run the same command again to continue",
                              plan.row));
    ++ran;
    write_table(out, selected);
    const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    const int64_t left = to_run - ran;
    o.say(fmt::format("{} of {} in {}; about {} left for {}", ran, rows_text(to_run),
                      clock_text(elapsed),
                      clock_text(elapsed / static_cast<double>(ran) * static_cast<double>(left)),
                      rows_text(left)));
  }
  write_table(out, selected);
  o.say(fmt::format("table: {} and {}", (out / "table.md").string(), (out / "table.csv").string()));
  return "";
}

}  // namespace tfm::internal::sweep
