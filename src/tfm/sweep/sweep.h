// tfm sweep: the paper's Table 3 at the scale of a recipe (docs/TABLE3.md). Each row's change is
// applied to the recipe's model (model/table3.h: scaled_row), trained for one budget with
// tfm::train, its newest checkpoints averaged, and the average evaluated on the recipe's validation
// set: perplexity per subword from the unsmoothed cross-entropy of teacher-forced scoring, and
// corpus BLEU of beam search. The table (Markdown and CSV) is rewritten after every row.
//
// A sweep directory holds sweep.json (the settings, checked on every later run), vocab/ (the one
// vocabulary every row shares, learned once), one folder per row (run/: the training run,
// averaged/, valid.hyp, result.json once the row is done) and table.md, table.csv. A row is done
// when its result.json exists: a killed sweep run again skips the done rows and resumes the
// unfinished one from its newest checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tfm::internal::sweep {

using Say = std::function<void(const std::string&)>;

// The settings of `tfm sweep` (its flags; docs/TABLE3.md).
struct SweepOptions {
  std::string config;
  std::vector<std::string> overrides;
  std::string rows = "all";
  double budget_minutes = -1;
  int64_t budget_steps = -1;
  std::string out;
  int64_t average = 0;          // 0: the recipe's checkpoints.keep
  int64_t valid_sentences = 0;  // 0: all
  int threads = -1;             // -1: the recipe's training.threads
  std::string device;           // empty: the recipe's training.device
  std::string precision = "f32";
  int64_t beam_size = 4;
  double alpha = 0.6;
  std::string shard;  // "K/N"
  int64_t max_rows = 0;
  bool table_only = false;  // only rewrite table.md and table.csv from the rows done
  // Each progress line ("base done: ..."), without the "sweep: " the command prints before it.
  Say say = [](const std::string&) {};
};

// Runs (or resumes) the sweep; with table_only returns table.md's text, else "". Every row runs
// under its directory's RunDirectoryLock, so that shards never train one row twice.
std::string run_sweep(const SweepOptions& options);

}  // namespace tfm::internal::sweep
