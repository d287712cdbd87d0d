// tfm bleu: corpus BLEU of a hypothesis file (or standard input) against one or more reference
// files, as `sacrebleu REF... -i HYP` computes it (docs/BLEU.md), or tokenized BLEU as
// multi-bleu.perl prints it, of tokenized text (--tokenized) or of text that Moses tokenizer.perl
// tokenizes here (--tokenize moses --lang L), with or without ##AT## compound splitting
// (--split-compounds): the paper's numbers.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/eval/bleu.h"
#include "tfm/io/text_lines.h"

namespace tfm::internal::cli {

namespace {

struct BleuCommandOptions {
  std::vector<std::string> references;
  std::string input = "-";
  std::string tokenize = "13a";
  std::string lang = "en";
  bool lang_given = false;
  bool split_compounds = false;
  bool lowercase = false;
  std::string smooth = "exp";
  bool smooth_given = false;
  double smooth_value = 0;
  bool smooth_value_given = false;
  int64_t max_ngram_order = 4;  // wider than the range, so that 10^11 gets the range message
  bool effective_order = false;
  bool tokenized = false;
  bool signature = false;
  bool json = false;
  bool print_tokenized = false;
};

// sacreBLEU reads every line with its trailing whitespace stripped (so a reference of spaces
// counts as empty, and "\r\n" endings do not matter).
std::vector<std::string> read_stripped_lines(const std::string& file) {
  std::vector<std::string> lines =
      file == "-" ? read_text_lines(std::cin, "<stdin>") : read_text_lines(file);
  for (std::string& line : lines) line = std::string(eval::rstrip_python_whitespace(line));
  return lines;
}

// The numeric options' ranges, said in words (CLI11's own range check would print the largest
// double as a 309-digit number).
void check_ranges(const BleuCommandOptions& options, eval::BleuSmoothing smoothing) {
  TFM_CHECK(options.max_ngram_order >= eval::kMinBleuNgramOrder &&
                options.max_ngram_order <= eval::kMaxBleuNgramOrder,
            "--max-ngram-order: {} is not in the allowed range {} to {}", options.max_ngram_order,
            eval::kMinBleuNgramOrder, eval::kMaxBleuNgramOrder);
  if (!options.smooth_value_given) return;
  TFM_CHECK(std::isfinite(options.smooth_value) && options.smooth_value >= 0,
            "--smooth-value: {} is not allowed (a finite number, 0 or more)", options.smooth_value);
  // sacreBLEU ignores the value of exp and none; a value that changes nothing is refused here.
  TFM_CHECK(smoothing == eval::BleuSmoothing::kFloor || smoothing == eval::BleuSmoothing::kAddK,
            "--smooth-value is used only by --smooth floor and add-k, not by {}",
            eval::bleu_smoothing_name(smoothing));
}

// The combinations that make no sense, each refused in one line.
void check_combinations(const BleuCommandOptions& options, bool moses) {
  const std::string mode = options.tokenized ? "--tokenized" : "--tokenize " + options.tokenize;
  TFM_CHECK(moses || !options.lang_given,
            "--lang is the language of --tokenize moses (tokenizer.perl -l); {} does not use it",
            mode);
  TFM_CHECK(options.tokenized || moses || !options.split_compounds,
            "--split-compounds splits the compounds of tokenized text: use it with --tokenize "
            "moses or --tokenized, not {}",
            mode);
  TFM_CHECK(!moses || !options.smooth_given,
            "--smooth: --tokenize moses is tokenized BLEU as multi-bleu.perl computes it, which "
            "has no smoothing");
  TFM_CHECK(options.print_tokenized || !options.references.empty(),
            "--reference is required (a reference file; repeat it for more references)");
}

void run_bleu(const BleuCommandOptions& options) {
  const bool moses = options.tokenize == "moses";  // --tokenized excludes --tokenize
  check_combinations(options, moses);
  eval::BleuOptions bleu;
  if (options.tokenized) {
    bleu = eval::tokenized_bleu_options();
  } else if (moses) {
    bleu = eval::moses_bleu_options(eval::moses_language_from_name(options.lang), false);
  } else {
    bleu.tokenizer = eval::bleu_tokenizer_from_name(options.tokenize);
    bleu.smoothing = eval::bleu_smoothing_from_name(options.smooth);
    if (options.smooth_value_given) bleu.smooth_value = options.smooth_value;
  }
  check_ranges(options, bleu.smoothing);
  bleu.split_compounds = options.split_compounds;
  bleu.lowercase = options.lowercase;
  bleu.max_ngram_order = static_cast<int>(options.max_ngram_order);  // checked above
  bleu.effective_order = options.effective_order;
  const bool multi_bleu_line = options.tokenized || moses;

  const std::string hyp_name = options.input == "-" ? "<stdin>" : options.input;
  if (options.print_tokenized) {
    // The lines as read, not stripped: with --tokenize moses, tokenizer.perl's output exactly.
    const std::vector<std::string> lines = options.input == "-"
                                               ? read_text_lines(std::cin, "<stdin>")
                                               : read_text_lines(options.input);
    std::string out;
    for (const std::string& line : lines) out += eval::bleu_tokenized_line(line, bleu) + '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    return;
  }
  const std::vector<std::string> hypotheses = read_stripped_lines(options.input);
  TFM_CHECK(!hypotheses.empty(), "hypotheses '{}' have no lines", hyp_name);
  std::vector<std::vector<std::string>> references;
  for (const std::string& file : options.references) {
    TFM_CHECK(file != "-", "references must be files (standard input is for the hypotheses)");
    references.push_back(read_stripped_lines(file));
    TFM_CHECK(references.back().size() == hypotheses.size(),
              "hypotheses '{}' have {} lines but reference '{}' has {} lines", hyp_name,
              hypotheses.size(), file, references.back().size());
  }

  const eval::BleuScore score = eval::corpus_bleu(hypotheses, references, bleu);
  if (options.json) {
    nlohmann::ordered_json out = score.to_json();
    out["tokenized_bleu"] = multi_bleu_line;
    out["hypotheses"] = hyp_name;
    out["references"] = options.references;
    std::printf("%s\n", out.dump(1).c_str());
  } else if (multi_bleu_line) {
    std::printf("%s\n", score.format_multi_bleu(options.signature).c_str());
  } else {
    std::printf("%s\n", score.format(options.signature).c_str());
  }
}

}  // namespace

void register_bleu(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "bleu",
      "Corpus BLEU of a hypothesis file against reference files, as sacreBLEU computes it, or "
      "tokenized BLEU as multi-bleu.perl does (--tokenized, --tokenize moses)");
  auto options = std::make_shared<BleuCommandOptions>();
  cmd->add_option("-r,--reference", options->references,
                  "A reference file, one segment a line (required; repeat for more references; "
                  "an empty line is a reference of length 0, as in sacreBLEU 2.2 and later)");
  cmd->add_option("-i,--input", options->input,
                  "The hypotheses, one a line (default '-': standard input)");
  CLI::Option* tokenize_option =
      cmd->add_option("--tokenize", options->tokenize,
                      "Tokenizer: 13a (default), intl, none, or moses: Moses tokenizer.perl -l "
                      "--lang, then tokenized BLEU as multi-bleu.perl prints it (the paper's)")
          ->check(CLI::IsMember({"13a", "intl", "none", "moses"}));
  CLI::Option* lang_option =
      cmd->add_option("--lang", options->lang,
                      "The language of --tokenize moses: en (default), de or fr")
          ->check(CLI::IsMember({"en", "de", "fr"}));
  cmd->add_flag("--split-compounds", options->split_compounds,
                "Split hyphenated compounds of the tokenized text, a-b -> a ##AT##-##AT## b (the "
                "paper's EN-DE score; with --tokenize moses or --tokenized)");
  cmd->add_flag("--lowercase", options->lowercase,
                "Lower-case hypotheses and references (also spelled -lc)");
  CLI::Option* smooth_option =
      cmd->add_option("--smooth", options->smooth, "Smoothing: exp (default), floor, add-k or none")
          ->check(CLI::IsMember({"exp", "floor", "add-k", "none"}));
  CLI::Option* smooth_value_option =
      cmd->add_option("--smooth-value", options->smooth_value,
                      "The value of floor (default 0.1) and add-k (default 1) smoothing: a finite "
                      "number, 0 or more");
  cmd->add_option("--max-ngram-order", options->max_ngram_order,
                  fmt::format("Longest n-gram, {} to {} (default 4)", eval::kMinBleuNgramOrder,
                              eval::kMaxBleuNgramOrder));
  cmd->add_flag("--effective-order", options->effective_order,
                "Average only over orders the hypotheses have n-grams of (for sentence BLEU)");
  CLI::Option* tokenized_option = cmd->add_flag(
      "--tokenized", options->tokenized,
      "Tokenized BLEU as the paper reports it (multi-bleu.perl): the text is already tokenized, "
      "split on whitespace only, no smoothing; prints multi-bleu.perl's line");
  CLI::Option* signature_option = cmd->add_flag(
      "--signature", options->signature,
      "Print the signature after 'BLEU|' (text output): sacreBLEU's, its version field included, "
      "or tfm's for --tokenize moses and --split-compounds");
  CLI::Option* json_option = cmd->add_flag("--json", options->json, "Machine-readable output");
  CLI::Option* print_option = cmd->add_flag(
      "--print-tokenized", options->print_tokenized,
      "Print the hypotheses as BLEU sees them (lower-cased, tokenized, compounds split) instead "
      "of scoring; no reference is read");

  tokenized_option->excludes(tokenize_option)->excludes(smooth_option);
  tokenized_option->excludes(smooth_value_option);
  print_option->excludes(json_option)->excludes(signature_option);

  cmd->callback([options, smooth_option, smooth_value_option, lang_option] {
    options->smooth_given = smooth_option->count() > 0;
    options->smooth_value_given = smooth_value_option->count() > 0;
    options->lang_given = lang_option->count() > 0;
    run_bleu(*options);
  });
}

}  // namespace tfm::internal::cli
