// `tfm sweep` end to end on the tiny generated corpus of train_test_util.h: the table's files and
// values, the parameter counts against `tfm info`, resuming (done rows skipped, a killed row
// continued from its checkpoint), shards, and one-line errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "build_paths.h"
#include "data_test_util.h"
#include "tfm/model/table3.h"
#include "tfm/train/checkpoint.h"
#include "train_test_util.h"

namespace tfm::internal {
namespace {

namespace fs = std::filesystem;
using testing::quoted;
using testing::run_tfm_command;
using testing::TempDir;

// A sweep of the tiny recipe: 4 updates per row, 10 validation sentences translated for BLEU.
std::string sweep(const TempDir& dir, const std::string& rows, const std::string& extra = "") {
  return fmt::format("sweep -c {} --rows {} --budget-steps 4 --valid-sentences 10 -o {} {}",
                     quoted(dir / "recipe.yaml"), rows, quoted(dir / "sweep"), extra);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

// table.csv as one map per row, keyed by column.
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& path) {
  const std::vector<std::string> lines = split(testing::read_text(path), '\n');
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  const std::vector<std::string> header = split(lines[0], ',');
  EXPECT_EQ(header, table3_columns());
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = split(lines[i], ',');
    if (lines[i].back() == ',') cells.emplace_back();  // an empty last cell
    EXPECT_EQ(cells.size(), header.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < header.size() && k < cells.size(); ++k) row[header[k]] = cells[k];
    rows.push_back(row);
  }
  return rows;
}

fs::file_time_type newest_checkpoint_time(const fs::path& run) {
  return fs::last_write_time(list_checkpoints(run / "checkpoints").back() / "model.safetensors");
}

TEST(CliSweep, TrainsTheRowsAndWritesTheTable) {
  TempDir dir;
  testing::write_recipe(dir);
  auto run = run_tfm_command(sweep(dir, "D3"), dir);
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("sweep: 2 rows in"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("sweep: [1/2] base"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("sweep: [2/2] D3 (eps_ls 0.0)"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("left for 1 row"), std::string::npos) << run.err;  // the ETA line

  const auto rows = read_csv(dir / "sweep" / "table.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("row"), "base");
  EXPECT_EQ(rows[1].at("row"), "D3");
  // The tiny recipe: 1 layer, d_model 16, d_ff 32, 2 heads of 8; D3 turns label smoothing off.
  EXPECT_EQ(rows[1].at("N"), "1");
  EXPECT_EQ(rows[1].at("d_model"), "16");
  EXPECT_EQ(rows[1].at("h"), "2");
  EXPECT_EQ(rows[1].at("d_k"), "8");
  EXPECT_EQ(rows[0].at("eps_ls"), "0.1");
  EXPECT_EQ(rows[1].at("eps_ls"), "0");
  EXPECT_EQ(rows[1].at("paper_ppl"), "4.67");
  EXPECT_EQ(rows[1].at("paper_bleu"), "25.3");
  EXPECT_EQ(rows[0].at("paper_params_millions"), "65");
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("train_steps"), "4");
    const double ppl = std::stod(row.at("ppl")), bleu = std::stod(row.at("bleu"));
    EXPECT_TRUE(std::isfinite(ppl) && ppl > 1) << ppl;
    EXPECT_TRUE(std::isfinite(bleu) && bleu >= 0 && bleu <= 100) << bleu;
    // The parameters are those `tfm info` counts for the averaged model's configuration.
    const fs::path averaged = dir / "sweep" / row.at("row") / "averaged";
    auto info = run_tfm_command(fmt::format("info -m {} --json", quoted(averaged)), dir);
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_EQ(
        row.at("params"),
        std::to_string(nlohmann::json::parse(info.out)["parameters"]["total"].get<int64_t>()));
  }
  const std::string markdown = testing::read_text(dir / "sweep" / "table.md");
  EXPECT_NE(markdown.find("| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls |"),
            std::string::npos);
  EXPECT_NE(markdown.find("| D3 | 1 | 16 | 32 | 2 | 8 | 8 |"), std::string::npos) << markdown;
  EXPECT_EQ(markdown.find("Not done yet"), std::string::npos) << markdown;

  // Each row's state: its result, the averaged checkpoints and its translations.
  const auto result =
      nlohmann::json::parse(testing::read_text(dir / "sweep" / "D3" / "result.json"));
  EXPECT_EQ(result["averaged"], nlohmann::json({"step-000000002", "step-000000004"}));
  EXPECT_EQ(result["bleu_sentences"], 10);
  // The products its updates ran in, as training recorded them (the tiny recipe's precision).
  EXPECT_EQ(result["train_products"], "f32");
  EXPECT_EQ(rows[1].at("train_products"), "f32");
  EXPECT_EQ(split(testing::read_text(dir / "sweep" / "D3" / "valid.hyp"), '\n').size(), 10u);
  // One vocabulary for every row, learned once.
  EXPECT_TRUE(fs::exists(dir / "sweep" / "vocab" / "vocab.model"));
  EXPECT_FALSE(fs::exists(dir / "sweep" / "D3" / "run" / "vocab.model"));

  // --table-only rebuilds the table from the finished rows and prints it.
  fs::remove(dir / "sweep" / "table.md");
  auto table = run_tfm_command(
      fmt::format("sweep --table-only -o {} --rows D3,E", quoted(dir / "sweep")), dir);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("| D3 | 1 | 16 |"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("Not done yet: E."), std::string::npos) << table.out;
  EXPECT_TRUE(fs::exists(dir / "sweep" / "table.md"));
}

// The perplexity is that of the plain cross-entropy, not of the label-smoothed loss: averaging one
// checkpoint, the sweep's figure is the one training's own validation reports for it.
TEST(CliSweep, PerplexityIsTheUnsmoothedOneOfTrainingsValidation) {
  TempDir dir;
  testing::write_recipe(dir);
  auto run = run_tfm_command(sweep(dir, "base", "--average 1"), dir);
  ASSERT_EQ(run.status, 0) << run.err;
  nlohmann::json last_valid;
  for (const std::string& line :
       split(testing::read_text(dir / "sweep" / "base" / "run" / "metrics.jsonl"), '\n')) {
    const auto record = nlohmann::json::parse(line);
    if (record["type"] == "valid") last_valid = record;
  }
  ASSERT_EQ(last_valid["step"], 4) << last_valid;
  const auto result =
      nlohmann::json::parse(testing::read_text(dir / "sweep" / "base" / "result.json"));
  EXPECT_EQ(result["averaged"], nlohmann::json({"step-000000004"}));
  const double ppl = result["perplexity"].get<double>();
  const double nll = last_valid["nll"].get<double>(), loss = last_valid["loss"].get<double>();
  EXPECT_NEAR(std::log(ppl), nll, 1e-4) << ppl;
  EXPECT_GT(std::abs(std::log(ppl) - loss), 0.01) << "the smoothed loss " << loss;
  // Every target subword of the 300 validation pairs, eos included.
  EXPECT_GT(result["ppl_tokens"].get<int64_t>(), 300);
}

TEST(CliSweep, ResumesWithoutRetrainingFinishedRows) {
  TempDir dir;
  testing::write_recipe(dir);
  // A first run stopped after one row (as a sweep killed between rows).
  auto first = run_tfm_command(sweep(dir, "E", "--max-rows 1"), dir);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("stopping after 1 row"), std::string::npos) << first.err;
  EXPECT_TRUE(fs::exists(dir / "sweep" / "base" / "result.json"));
  EXPECT_FALSE(fs::exists(dir / "sweep" / "E"));
  EXPECT_NE(testing::read_text(dir / "sweep" / "table.md").find("Not done yet: E."),
            std::string::npos);
  const auto base_time = newest_checkpoint_time(dir / "sweep" / "base" / "run");
  const std::string base_result = testing::read_text(dir / "sweep" / "base" / "result.json");

  auto second = run_tfm_command(sweep(dir, "E"), dir);
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_NE(second.err.find("sweep: skipping base: done"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("sweep: [1/1] E"), std::string::npos) << second.err;
  EXPECT_EQ(newest_checkpoint_time(dir / "sweep" / "base" / "run"), base_time);
  EXPECT_EQ(testing::read_text(dir / "sweep" / "base" / "result.json"), base_result);
  EXPECT_EQ(read_csv(dir / "sweep" / "table.csv").size(), 2u);
  const std::string e_result = testing::read_text(dir / "sweep" / "E" / "result.json");

  // A row killed during training: its result and newest checkpoint gone, it resumes from the
  // checkpoint before (step 2), trains to the budget, and measures the same model again.
  fs::remove(dir / "sweep" / "E" / "result.json");
  fs::remove_all(list_checkpoints(dir / "sweep" / "E" / "run" / "checkpoints").back());
  auto third = run_tfm_command(sweep(dir, "E"), dir);
  ASSERT_EQ(third.status, 0) << third.err;
  EXPECT_NE(third.err.find("skipping base: done"), std::string::npos) << third.err;
  EXPECT_NE(third.err.find("resuming from"), std::string::npos) << third.err;
  EXPECT_NE(third.err.find("step-000000002 (step 2"), std::string::npos) << third.err;
  EXPECT_EQ(list_checkpoints(dir / "sweep" / "E" / "run" / "checkpoints").back().filename(),
            "step-000000004");
  const auto again = nlohmann::json::parse(testing::read_text(dir / "sweep" / "E" / "result.json"));
  const auto before = nlohmann::json::parse(e_result);
  EXPECT_EQ(again["perplexity"], before["perplexity"]);  // resuming is exact (docs/TRAINING.md)
  EXPECT_EQ(again["bleu"], before["bleu"]);

  // A run with other settings is refused rather than mixed into the same table.
  auto other = run_tfm_command(fmt::format("sweep -c {} --rows E --budget-steps 5 -o {}",
                                           quoted(dir / "recipe.yaml"), quoted(dir / "sweep")),
                               dir);
  EXPECT_NE(other.status, 0);
  EXPECT_NE(other.err.find("was started with budget {\"steps\":4}"), std::string::npos)
      << other.err;
  EXPECT_EQ(std::count(other.err.begin(), other.err.end(), '\n'), 1) << other.err;
}

TEST(CliSweep, ShardsSplitTheRowsBetweenProcesses) {
  TempDir dir;
  testing::write_recipe(dir);
  // Rows base, D1, E: shard 0 of 2 runs base and E, shard 1 runs D1; both at once.
  const std::string both = fmt::format(
      "'{0}/tfm' {1} --shard 0/2 > {2} 2>&1 & '{0}/tfm' {3} --shard 1/2 > {4} 2>&1; "
      "wait",
      tfm_binary_dir(), sweep(dir, "D1,E"), quoted(dir / "log0"), sweep(dir, "D1,E"),
      quoted(dir / "log1"));
  ASSERT_EQ(std::system(("cd " + quoted(dir.path()) + " && " + both).c_str()), 0);
  const std::string log0 = testing::read_text(dir / "log0"),
                    log1 = testing::read_text(dir / "log1");
  EXPECT_NE(log0.find("(shard 0 of 2)"), std::string::npos) << log0;
  EXPECT_NE(log0.find("] base"), std::string::npos) << log0;
  EXPECT_NE(log0.find("] E"), std::string::npos) << log0;
  EXPECT_EQ(log0.find("] D1"), std::string::npos) << log0;
  EXPECT_NE(log1.find("] D1"), std::string::npos) << log1;
  EXPECT_EQ(log1.find("] base"), std::string::npos) << log1;
  for (const char* row : {"base", "D1", "E"})
    EXPECT_TRUE(fs::exists(dir / "sweep" / row / "result.json")) << row << "\n" << log0 << log1;
  // Whichever shard ended last may have missed the other's last row; --table-only assembles all.
  auto table = run_tfm_command(
      fmt::format("sweep --table-only -o {} --rows D1,E", quoted(dir / "sweep")), dir);
  ASSERT_EQ(table.status, 0) << table.err;
  const auto rows = read_csv(dir / "sweep" / "table.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1].at("row"), "D1");
  EXPECT_EQ(rows[1].at("P_drop"), "0");
}

TEST(CliSweep, BadInputIsAOneLineError) {
  TempDir dir;
  testing::write_recipe(dir);
  const std::string recipe = quoted(dir / "recipe.yaml");
  const std::string out = quoted(dir / "sweep");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fmt::format("sweep -c {} --rows A9 --budget-steps 2 -o {}", recipe, out),
       "unknown Table 3 row or group 'A9'"},
      {fmt::format("sweep -c {} --budget-steps 2 --budget-minutes 1 -o {}", recipe, out),
       "--budget-minutes excludes --budget-steps"},
      {fmt::format("sweep -c {} -o {}", recipe, out), "give one budget per row"},
      {fmt::format("sweep --budget-steps 2 -o {}", out), "needs a recipe"},
      {fmt::format("sweep -c {} --budget-steps 2 -o {}", quoted(dir / "missing.yaml"), out),
       "missing.yaml"},
      {fmt::format("sweep -c {} --budget-steps 2 -o {} --shard 3/2", recipe, out), "--shard '3/2'"},
      {fmt::format("sweep -c {} --budget-steps 2 -o {} --shard x", recipe, out), "--shard 'x'"},
      {fmt::format("sweep -c {} --budget-steps 2 -o {} --average 9", recipe, out),
       "--average 9 needs that many checkpoints"},
      {fmt::format(
           "sweep -c {} --budget-steps 2 -o {} --set data.valid_source= --set data.valid_target=",
           recipe, out),
       "the recipe has no validation set"},
      // 5 heads of 8: A2's 2.5 heads round to 3, which do not divide h x d_k = 40.
      {fmt::format("sweep -c {} --budget-steps 2 -o {} --set model.heads=5 --rows A2", recipe, out),
       "Table 3 row A2 cannot be scaled"},
      {fmt::format("sweep --table-only -o {}", quoted(dir / "nothing")), "no such sweep directory"},
  };
  for (const auto& [arguments, expected] : cases) {
    auto run = run_tfm_command(arguments, dir);
    EXPECT_NE(run.status, 0) << arguments;
    EXPECT_NE(run.err.find(expected), std::string::npos) << arguments << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << arguments << "\n" << run.err;
  }
  // Nothing was trained by any of them.
  EXPECT_FALSE(fs::exists(dir / "sweep" / "base"));
}

}  // namespace
}  // namespace tfm::internal
