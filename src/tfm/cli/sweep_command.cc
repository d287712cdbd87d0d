// tfm sweep: the flags of the Table 3 sweep (sweep/sweep.h does the work; docs/TABLE3.md), its
// progress lines on stderr and, with --table-only, table.md on stdout.
#include <cstdio>
#include <memory>
#include <string>

#include "tfm/cli/commands.h"
#include "tfm/sweep/sweep.h"

namespace tfm::internal::cli {

void register_sweep(CLI::App& app) {
  auto o = std::make_shared<sweep::SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Train the paper's Table 3 rows scaled to a recipe and tabulate them");
  cmd->add_option("-c,--config", o->config, "the recipe (YAML) whose model the rows change")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", o->overrides,
                  "override a recipe option for every row: section.key=value (repeatable)");
  cmd->add_option("--rows", o->rows,
                  "rows and groups, comma-separated: A..E, big, A1, C3, ... or all (default); "
                  "base is always included");
  CLI::Option* minutes =
      cmd->add_option("--budget-minutes", o->budget_minutes, "training minutes per row")
          ->check(CLI::Range(0.001, 1e7));
  CLI::Option* steps = cmd->add_option("--budget-steps", o->budget_steps, "updates per row")
                           ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  minutes->excludes(steps);
  cmd->add_option("-o,--out", o->out, "the sweep directory (resumable)")->required();
  cmd->add_option("--average", o->average,
                  "newest checkpoints averaged per row (default: the recipe's checkpoints.keep)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--valid-sentences", o->valid_sentences,
                  "validation sentences translated for BLEU (default: all; perplexity uses all)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--beam-size", o->beam_size, "beam size of the BLEU translations (default 4)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--alpha", o->alpha, "length penalty (default 0.6)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--precision", o->precision, "evaluation products: f32 (default), bf16, auto");
  cmd->add_option("--threads", o->threads, "threads (0: all cores; default: the recipe's)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--device", o->device, "cpu, cuda or auto (default: the recipe's)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--shard", o->shard,
                  "K/N: run only the rows i (in table order) with i % N == K, for N processes");
  cmd->add_option("--max-rows", o->max_rows, "train at most this many rows in this run")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--table-only", o->table_only,
                "only rewrite table.md and table.csv from the rows done, and print table.md");
  cmd->callback([o] {
    o->say = [](const std::string& line) { std::fprintf(stderr, "sweep: %s\n", line.c_str()); };
    std::fputs(sweep::run_sweep(*o).c_str(), stdout);
  });
}

}  // namespace tfm::internal::cli
