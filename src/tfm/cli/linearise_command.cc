// tfm linearise: a parser's training data from bracketed trees. Each tree is normalised as
// parser evaluations do and written as its words (the source) and its linearised form (the
// target; --leaves words writes each word where the default writes XX), one sentence a line, in
// tree order; optionally the normalised trees too (the gold side for tfm evalb). docs/PARSING.md.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/cli/text_io.h"
#include "tfm/core/error.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/tasks/parsing.h"

namespace tfm::internal::cli {

namespace {

struct LineariseOptions {
  std::string input;
  std::string words, sequences, trees;
  std::string range;          // "FIRST-LAST", 1-based and inclusive; empty: all trees
  std::string leaves = "xx";  // what a preterminal is written as: XX or its word
};

void run_linearise(const LineariseOptions& options) {
  const data::TreeLeaves leaves = data::tree_leaves_named(options.leaves);
  const std::vector<data::Tree> trees = data::read_tree_file(options.input);
  size_t first = 1, last = trees.size();
  if (!options.range.empty()) {
    long long a = 0, b = 0;
    char dash = 0;
    int consumed = 0;
    const int n = std::sscanf(options.range.c_str(), "%lld%c%lld%n", &a, &dash, &b, &consumed);
    TFM_CHECK(n == 3 && dash == '-' && consumed == static_cast<int>(options.range.size()) &&
                  a >= 1 && b >= a,
              "--range '{}': expected FIRST-LAST with 1 <= FIRST <= LAST", options.range);
    TFM_CHECK(static_cast<size_t>(b) <= trees.size(), "--range '{}': {} has only {} trees",
              options.range, options.input, trees.size());
    first = static_cast<size_t>(a);
    last = static_cast<size_t>(b);
  }
  std::ofstream words, sequences, gold;
  open_for_writing(words, options.words);
  open_for_writing(sequences, options.sequences);
  if (!options.trees.empty()) open_for_writing(gold, options.trees);
  size_t empty = 0;
  for (size_t i = first; i <= last; ++i) {
    const data::Tree tree = data::normalise(trees[i - 1]);
    if (tree.empty()) ++empty;
    std::vector<std::string> escaped;
    for (const std::string& word : data::tree_words(tree))
      escaped.push_back(data::escape_word(word));
    words << tasks::parse_source(escaped) << "\n";
    sequences << data::linearise(tree, leaves) << "\n";
    if (gold.is_open()) gold << (tree.empty() ? "" : data::to_string(tree)) << "\n";
  }
  TFM_CHECK(words.good() && sequences.good() && (!gold.is_open() || gold.good()),
            "writing {} / {} failed", options.words, options.sequences);
  std::fprintf(stderr, "linearised %zu trees (%zu-%zu of %zu in %s)%s\n", last - first + 1, first,
               last, trees.size(), options.input.c_str(),
               empty ? fmt::format(", {} empty after normalisation", empty).c_str() : "");
}

}  // namespace

void register_linearise(CLI::App& app) {
  auto o = std::make_shared<LineariseOptions>();
  CLI::App* cmd = app.add_subcommand(
      "linearise", "Write bracketed trees as a parser's training data: words and tree sequences");
  cmd->add_option("-i,--input", o->input, "trees: one a line, or PTB .mrg text (gzip or plain)")
      ->required();
  cmd->add_option("--words", o->words, "output: the words of each tree, one sentence a line")
      ->required();
  cmd->add_option("--sequences", o->sequences, "output: each tree linearised, one a line")
      ->required();
  cmd->add_option("--trees", o->trees, "output: each tree normalised, one a line (gold for evalb)");
  cmd->add_option("--range", o->range, "only trees FIRST-LAST (1-based, inclusive)");
  cmd->add_option("--leaves", o->leaves,
                  "xx: every preterminal written as XX (default); words: as its word (the "
                  "lexicalised scheme, for a model with model.tree_leaves: words)")
      ->check(CLI::IsMember({"xx", "words"}));
  cmd->callback([o] { run_linearise(*o); });
}

}  // namespace tfm::internal::cli
