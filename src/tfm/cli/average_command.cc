// tfm average: averages the parameters of checkpoints into one model directory, as the paper does
// with the last 5 (base) or 20 (big) checkpoints of a run.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/train/checkpoint.h"

namespace tfm::internal::cli {

namespace {

struct AverageOptions {
  std::vector<std::string> models;
  std::string checkpoints;
  int last = 5;
  std::string output;
};

void run_average(const AverageOptions& options) {
  std::vector<std::filesystem::path> inputs(options.models.begin(), options.models.end());
  if (!options.checkpoints.empty()) {
    TFM_CHECK(inputs.empty(), "give either model directories or --checkpoints, not both");
    inputs = newest_checkpoints(options.checkpoints, options.last);
  }
  TFM_CHECK(!inputs.empty(), "nothing to average: give model directories or --checkpoints DIR");
  average_models(inputs, options.output);
  std::fprintf(stderr, "averaged %zu models into %s:\n", inputs.size(), options.output.c_str());
  for (const auto& input : inputs) std::fprintf(stderr, "  %s\n", input.c_str());
}

}  // namespace

void register_average(CLI::App& app) {
  auto options = std::make_shared<AverageOptions>();
  CLI::App* cmd = app.add_subcommand(
      "average", "Average the parameters of checkpoints (model directories) into one model");
  cmd->add_option("models", options->models, "model directories or checkpoints to average");
  cmd->add_option("-c,--checkpoints", options->checkpoints,
                  "a run's checkpoint folder: average its newest --last checkpoints");
  cmd->add_option("-n,--last", options->last, "how many of the newest checkpoints (default 5)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-o,--output", options->output, "the averaged model directory")->required();
  cmd->callback([options] { run_average(*options); });
}

}  // namespace tfm::internal::cli
