// tfm attention: one sentence pair's attention as a self-contained HTML page (head view, model
// view, the paper's figures 3-5 layout) or as a standalone SVG figure. The target is the model's
// own translation (beam search) unless --target gives one; the weights come from the incremental
// decoder (decode::attention_maps). docs/ATTENTION.md.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/attention_maps.h"
#include "tfm/decode/translate.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/text_reader.h"
#include "tfm/model/model_dir.h"
#include "tfm/ops/autocast.h"
#include "tfm/ops/device.h"
#include "tfm/translation/model_loading.h"
#include "tfm/translation/text_translation.h"
#include "tfm/viz/attention_view.h"
#include "tfm/viz/view_from_maps.h"

namespace tfm::internal::cli {

namespace {

struct AttentionCommandOptions {
  std::string model;
  std::string source;
  std::string target;
  bool has_target = false;
  bool translate = false;  // the default; the flag only says so
  std::string output;
  bool words = false;
  decode::TranslateOptions decoding;
  std::string figure_kind = "encoder";
  int64_t figure_layer = -1;
  std::string figure_heads = "all";
  std::string figure_token;
  int threads = 0;
  std::string precision = "f32";
  std::string device = "cpu";
};

// "4,5" -> {4, 5}; "all" -> {} (every head).
std::vector<int64_t> parse_heads(const std::string& text) {
  std::vector<int64_t> heads;
  if (text == "all") return heads;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    size_t used = 0;
    int64_t head = -1;
    try {
      head = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TFM_CHECK(!item.empty() && used == item.size() && head >= 0,
              "--figure-heads '{}': expected 0-based head numbers separated by commas, or 'all'",
              text);
    heads.push_back(head);
    begin = comma + 1;
  }
  return heads;
}

// --figure-token: a 0-based index into the figure kind's query tokens, or a token's text (its
// first occurrence; "▁" marks may be left out).
int64_t figure_token(const std::string& text, const viz::AttentionView& view,
                     const std::string& kind_name) {
  if (text.empty()) return -1;
  if (text.find_first_not_of("0123456789") == std::string::npos) {
    // std::stoll would throw out_of_range (an "internal error") past int64.
    TFM_CHECK(text.size() <= 18, "--figure-token {} is far beyond the query tokens", text);
    return std::stoll(text);
  }
  for (const viz::AttentionKind& kind : view.kinds) {
    if (kind.name != kind_name) continue;
    for (size_t q = 0; q < kind.queries.size(); ++q) {
      const std::string& token = kind.queries[q];
      if (token == text || token == "\xE2\x96\x81" + text) return static_cast<int64_t>(q);
    }
    std::string known;
    for (const std::string& token : kind.queries) known += (known.empty() ? "" : " ") + token;
    TFM_CHECK(false, "--figure-token '{}' is not one of the {} tokens: {}", text, kind_name, known);
  }
  return -1;  // an unknown kind: viz::resolved names it
}

void run_attention(const AttentionCommandOptions& options) {
  const std::filesystem::path output = options.output;
  const std::string extension = output.extension().string();
  const bool svg = extension == ".svg";
  TFM_CHECK(svg || extension == ".html" || extension == ".htm",
            "-o '{}': expected a .html (the page) or .svg (the figure) file name", options.output);
  set_num_threads(options.threads);
  const std::filesystem::path dir = options.model;
  const auto model = decode::load_inference_model(
      dir, translation::inference_options(options.precision, options.device));
  const ModelConfig& config = model->config();
  const data::Vocabulary vocab = translation::model_vocabulary(
      dir, config, "a model directory needs its SentencePiece vocabulary");

  for (const auto& [flag, text] :
       {std::pair{"-i", &options.source}, std::pair{"--target", &options.target}}) {
    const std::optional<size_t> bad = find_invalid_utf8(*text);
    TFM_CHECK(!bad, "{}: invalid UTF-8 at byte {}", flag, bad.value_or(0));
  }
  const std::vector<int32_t> source = vocab.encode(options.source);
  TFM_CHECK(!source.empty(), "-i: the source sentence is empty");
  const int64_t longest = decode::max_input_length(options.decoding, config);
  TFM_CHECK(static_cast<int64_t>(source.size()) <= longest,
            "-i: the source sentence has {} subword tokens, more than the model's maximum input "
            "length {}",
            source.size(), longest);
  std::vector<int32_t> target;
  if (options.has_target) {
    target = vocab.encode_target(options.target);
  } else {
    decode::TranslateOptions decoding = options.decoding;
    decoding.n_best = 1;
    const auto best = decode::translate(*model, {source}, decoding)[0];
    TFM_CHECK(!best.empty(), "the model found no translation of the source sentence");
    target = best.front().tokens;
  }
  const decode::AttentionMaps maps = decode::attention_maps(*model, source, target);

  viz::AttentionView view = viz::view_from_maps(maps, translation::pieces(vocab, source),
                                                translation::pieces(vocab, target), options.words);
  view.title = fmt::format("tfm attention · model {}", dir.string());
  view.source = options.source;
  view.target = vocab.decode(target);

  viz::FigureOptions figure;
  figure.kind = options.figure_kind;
  figure.layer = options.figure_layer;
  figure.heads = parse_heads(options.figure_heads);
  figure.token = figure_token(options.figure_token, view, options.figure_kind);
  figure = viz::resolved(figure, view);
  write_file_atomically(output, svg ? viz::figure_svg(view, figure) : viz::page_html(view, figure));
  std::fprintf(stderr, "tfm attention: %s -> %s (%s)\n", options.source.c_str(),
               view.target.c_str(), output.string().c_str());
}

}  // namespace

void register_attention(CLI::App& app) {
  auto o = std::make_shared<AttentionCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "attention",
      "Draw a sentence pair's attention: an HTML page (head view, model view, the paper's "
      "figure layout) or an SVG figure");
  cmd->add_option("-m,--model", o->model,
                  "model directory (config.json, model.safetensors, "
                  "vocab.model)")
      ->required();
  cmd->add_option("-i,--input", o->source, "the source sentence (text)")->required();
  CLI::Option* target = cmd->add_option("--target", o->target,
                                        "the target sentence (default: the model's translation)");
  cmd->add_flag("--translate", o->translate, "translate the source with beam search (the default)")
      ->excludes(target);
  cmd->add_option("-o,--output", o->output,
                  "page.html (the interactive page) or figure.svg (the static figure alone)")
      ->required();
  cmd->add_flag("--words", o->words,
                "merge subword pieces into words (attention to a word summed over its pieces, "
                "from a word averaged)");
  cmd->add_option("-b,--beam-size", o->decoding.beam_size, "beam size; 1: greedy (default 4)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}));
  cmd->add_option("--alpha", o->decoding.alpha, "length penalty exponent (default 0.6)");
  cmd->add_option("--figure-kind", o->figure_kind,
                  "the figure's attention: encoder, decoder or cross (default encoder)")
      ->check(CLI::IsMember({"encoder", "decoder", "cross"}));
  cmd->add_option("--figure-layer", o->figure_layer,
                  "the figure's layer, 0-based (default: the next to last, the paper's '5 of 6')")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--figure-heads", o->figure_heads,
                  "the figure's heads, 0-based, comma-separated, or 'all' (default all)");
  cmd->add_option("--figure-token", o->figure_token,
                  "only this query token's attention (as figure 3): a 0-based index or the "
                  "token's text (default: every token's, as figures 4 top and 5)");
  cmd->add_option("--threads", o->threads, "threads (0: all cores)")->check(CLI::Range(0, 4096));
  cmd->add_option("--precision", o->precision, "operands of the matrix products: f32, bf16 or auto")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda (default cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([o, target] {
    o->has_target = target->count() > 0;
    run_attention(*o);
  });
}

}  // namespace tfm::internal::cli
