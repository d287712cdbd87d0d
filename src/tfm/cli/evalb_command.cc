// tfm evalb: labelled bracketing scores of parser output against gold trees, printed as the
// standard EVALB program prints them with COLLINS.prm or nk.prm (docs/PARSING.md).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/data/trees.h"
#include "tfm/eval/evalb.h"

namespace tfm::internal::cli {

namespace {

struct EvalbCommandOptions {
  std::string gold, test;
  std::string params = "collins";
};

void run_evalb(const EvalbCommandOptions& options) {
  const eval::EvalbParams params = eval::evalb_params(options.params);
  const std::vector<data::Tree> gold = data::read_tree_file(options.gold);
  const std::vector<data::Tree> test = data::read_tree_file(options.test);
  TFM_CHECK(gold.size() == test.size(), "gold '{}' has {} trees but test '{}' has {}", options.gold,
            gold.size(), options.test, test.size());
  const eval::EvalbResult result = eval::evalb(gold, test, params);
  // As evalb: the report on standard output, one line per error sentence on standard error.
  std::fputs(eval::format_evalb(result).c_str(), stdout);
  std::fflush(stdout);
  std::fputs(eval::format_evalb_errors(result).c_str(), stderr);
  TFM_CHECK(!result.stopped,
            "evalb stopped at sentence {}: more than MAX_ERROR ({}) error sentences (the trees "
            "do not have the same words; nk.prm allows 10000)",
            result.sentences.back().id, params.max_error);
}

}  // namespace

void register_evalb(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "evalb",
      "Labelled bracketing precision, recall and F1 of parsed trees, as EVALB prints them");
  auto options = std::make_shared<EvalbCommandOptions>();
  cmd->add_option("GOLD", options->gold, "Gold trees: one a line, or PTB .mrg text (gzip or plain)")
      ->required();
  cmd->add_option("TEST", options->test, "Parsed trees, as many as the gold ones")->required();
  cmd->add_option("-p,--params", options->params,
                  "EVALB parameters: collins (COLLINS.prm, default), nk (nk.prm) or a .prm file");
  cmd->callback([options] { run_evalb(*options); });
}

}  // namespace tfm::internal::cli
