// tfm parse: sentences in (tokenised, raw, or the words and tags of bracketed trees), one tree a
// line out, in input order, with a parsing model (config.json task "parsing"). Empty input lines
// give empty output lines. docs/PARSING.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/cli/text_io.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/data/vocab.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/tasks/parsing.h"
#include "tfm/translation/model_loading.h"

namespace tfm::internal::cli {

namespace {

struct ParseCommandOptions {
  std::string model;
  std::string input;   // empty or "-": stdin
  std::string output;  // empty or "-": stdout
  std::string input_format = "tokens";
  decode::TranslateOptions decoding = tasks::paper_parse_options();
  int64_t n_best = 1;
  bool no_constraints = false;  // the model alone: its hypotheses need not be trees
  int64_t chunk = 256;          // sentences per progress report
  int threads = 0;
  std::string precision = "f32";
  std::string device = "cpu";
};

// The sentences of the input: words, and tags where the input has them.
std::vector<tasks::ParseInput> read_inputs(const ParseCommandOptions& options) {
  const std::string name = input_name(options.input);
  const std::vector<std::string> lines = read_input_lines(options.input);
  std::vector<tasks::ParseInput> inputs;
  if (options.input_format == "trees") {
    for (const data::Tree& tree : data::parse_trees(lines, name)) {
      const data::Tree clean = data::normalise(tree);
      inputs.push_back({data::tree_words(clean), data::tree_tags(clean)});
      for (std::string& word : inputs.back().words) word = data::escape_word(word);
    }
    return inputs;
  }
  for (const std::string& line : lines)
    inputs.push_back(
        {options.input_format == "raw" ? data::ptb_tokenize(line) : data::split_words(line), {}});
  return inputs;
}

void run_parse(const ParseCommandOptions& options) {
  check_standard_input(options.input);  // before any file is opened
  TFM_CHECK(options.n_best <= options.decoding.beam_size, "--n-best {} exceeds the beam size {}",
            options.n_best, options.decoding.beam_size);
  set_num_threads(options.threads);
  const decode::InferenceOptions inference =
      translation::inference_options(options.precision, options.device);
  const std::filesystem::path dir = options.model;
  const ModelConfig header = load_config(dir / kConfigFileName);
  TFM_CHECK(header.task == "parsing",
            "{}: a {} model (config.json task \"{}\"); tfm parse needs one trained with "
            "model.task: parsing",
            dir.string(), header.task, header.task);
  const std::shared_ptr<const decode::InferenceModel> model =
      decode::load_inference_model(dir, inference);
  const data::Vocabulary vocab =
      translation::model_vocabulary(dir, model->config(), "a parser needs its vocabulary");

  const std::vector<tasks::ParseInput> inputs = read_inputs(options);
  const int64_t longest = decode::max_input_length(options.decoding, model->config());
  const std::string name = input_name(options.input);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t tokens = vocab.encode(tasks::parse_source(inputs[i].words)).size();
    TFM_CHECK(static_cast<int64_t>(tokens) <= longest,
              "{}: sentence {}: {} source tokens, more than the maximum input length {}", name,
              i + 1, tokens, longest);
  }
  // A file is replaced only when every sentence is parsed and written.
  TextOutput output(options.output);

  const decode::Translator translator(model, options.decoding, options.threads);
  tasks::ParseCounts counts;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto seconds = [&] {
    return std::max(std::chrono::duration<double>(clock::now() - start).count(), 1e-9);
  };
  for (size_t begin = 0; begin < inputs.size(); begin += static_cast<size_t>(options.chunk)) {
    const size_t end = std::min(inputs.size(), begin + static_cast<size_t>(options.chunk));
    const std::vector<tasks::ParseInput> chunk(inputs.begin() + static_cast<ptrdiff_t>(begin),
                                               inputs.begin() + static_cast<ptrdiff_t>(end));
    const std::vector<tasks::ParseResult> results =
        tasks::parse(translator, vocab, chunk, options.n_best, !options.no_constraints, &counts);
    std::ostringstream out;  // the chunk's lines
    for (size_t k = 0; k < results.size(); ++k) {
      if (options.n_best == 1) {
        out << (results[k].trees.empty() ? "" : data::to_string(results[k].trees.front().tree))
            << "\n";
        continue;
      }
      for (const tasks::ParsedTree& parsed : results[k].trees)
        out << begin + k << " ||| " << data::to_string(parsed.tree) << " ||| " << parsed.score
            << " ||| " << parsed.repairs << "\n";
    }
    output.write(out.str());
    if (end < inputs.size())
      std::fprintf(stderr, "parsed %zu/%zu sentences, %.1f sentences/s\n", end, inputs.size(),
                   static_cast<double>(end) / seconds());
  }
  output.commit();
  std::fprintf(stderr,
               "parsed %zu sentences in %.2f s, %.2f sentences/s (tree constraint %s); best "
               "hypothesis not a tree: %lld, repaired (no tree in the beam): %lld\n",
               inputs.size(), seconds(), static_cast<double>(inputs.size()) / seconds(),
               options.no_constraints ? "off" : "on",
               static_cast<long long>(counts.best_ill_formed),
               static_cast<long long>(counts.repaired));
}

}  // namespace

void register_parse(CLI::App& app) {
  auto o = std::make_shared<ParseCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "parse", "Parse sentences into constituency trees with a parsing model directory");
  cmd->add_option("-m,--model", o->model, "model directory of a parser (config.json task parsing)")
      ->required();
  cmd->add_option("-i,--input", o->input, "input file, plain or .gz (default: stdin)");
  cmd->add_option("-o,--output", o->output, "output file, one tree a line (default: stdout)");
  cmd->add_option("--input-format", o->input_format,
                  "tokens: tokenised words, one sentence a line (default); raw: text, tokenised "
                  "as the Penn Treebank is; trees: bracketed trees, whose words and tags are used")
      ->check(CLI::IsMember({"tokens", "raw", "trees"}));
  cmd->add_option("-b,--beam-size", o->decoding.beam_size, "beam size (default 21, the paper's)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--alpha", o->decoding.alpha, "length penalty exponent (default 0.3)")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--max-length-offset", o->decoding.max_length_offset,
                  "maximum output length = source length + this (default 300)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--n-best", o->n_best,
                  "trees per sentence; above 1 the lines are 'line ||| tree ||| score ||| repairs'")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_flag("--no-constraints", o->no_constraints,
                "search without the tree constraint (the model alone: hypotheses that are not "
                "trees over the input's words are repaired afterwards)");
  cmd->add_option("--batch-size", o->decoding.batch_size, "sentences per batch (default 32)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(CLI::Range(0, 4096));
  cmd->add_option("--precision", o->precision, "f32, bf16 or auto (default f32)");
  cmd->add_option("--device", o->device, "cpu or cuda (default cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([o] { run_parse(*o); });
}

}  // namespace tfm::internal::cli
