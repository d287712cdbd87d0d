// tfm train: trains a model from a YAML recipe (docs/TRAINING.md); flags override the recipe.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/dist/communicator.h"
#include "tfm/train.h"

namespace tfm::internal::cli {

namespace {

struct TrainOptions {
  std::string config;
  std::vector<std::string> overrides;
  bool resume = false;
  std::string run_dir;
  int64_t max_steps = -1;
  double max_minutes = -1;
  int threads = -1;
  std::string device;
};

void run_train(const TrainOptions& options) {
  // The library's tfm::train runs it (validation BLEU wired in there); the CLI only maps its flags.
  tfm::TrainingOptions training;
  training.recipe = options.config;
  training.overrides = options.overrides;
  training.run_dir = options.run_dir;
  training.max_steps = options.max_steps;
  training.max_minutes = options.max_minutes;
  training.threads = options.threads;
  training.resume = options.resume;
  if (!options.device.empty()) training.device = tfm::parse_device(options.device);
  if (tfm::train(training).interrupted) {
    const tfm::internal::dist::LaunchInfo launch = tfm::internal::dist::launch_info();
    if (launch.size == 1) throw tfm::Error("training interrupted; continue it with --resume");
    // Every rank agreed to stop and rank 0 saved: the job ends normally, with one message.
    if (launch.rank == 0)
      std::fprintf(stderr, "tfm: training interrupted; continue it with --resume\n");
    std::exit(1);
  }
}

}  // namespace

void register_train(CLI::App& app) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model from a YAML recipe");
  cmd->add_option("-c,--config", options->config, "the recipe (YAML)")->check(CLI::ExistingFile);
  cmd->add_option("--set", options->overrides,
                  "override a recipe option: section.key=value (repeatable)");
  cmd->add_flag("--resume", options->resume,
                "continue from the newest checkpoint in the run directory");
  cmd->add_option("-o,--run-dir", options->run_dir, "run directory (training.run_dir)");
  // -1 (not given) is the default only: a negative value typed on the command line is an error.
  cmd->add_option("--max-steps", options->max_steps, "stop after this many updates")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--max-minutes", options->max_minutes, "stop after this many minutes")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--threads", options->threads, "threads (0: all cores)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--device", options->device,
                  "cpu, cuda or auto: the GPU where there is one (training.device)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->callback([options] { run_train(*options); });
}

}  // namespace tfm::internal::cli
