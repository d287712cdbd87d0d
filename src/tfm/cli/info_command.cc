// tfm info: a configuration's Table 3 columns, exact parameter count with its breakdown, and
// forward FLOPs per token, for a preset, a config.json, a model directory or every preset at once;
// with --cpu, the CPU's instruction-set levels and the one in use (kernels/cpu/isa_dispatch.h).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"
#include "tfm/model/config.h"
#include "tfm/model/model_dir.h"
#include "tfm/model/parameters.h"
#include "tfm/ops/autocast.h"

namespace tfm::internal::cli {

namespace {

struct InfoOptions {
  std::string preset = "base";
  std::string model_dir;
  std::string config_file;
  int64_t vocab_size = 0;  // 0: keep the configuration's (an explicit 0 is refused)
  bool attention_bias = false;
  int64_t length = 25;
  int64_t source_length = -1;  // -1: --length
  int64_t target_length = -1;  // -1: --length
  bool vocab_given = false;
  bool all_presets = false;
  bool json = false;
  bool cpu = false;
};

// A described configuration: where it came from, and the configuration.
struct Subject {
  std::string label;
  std::optional<std::string> preset;
  ModelConfig config;
};

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string with_commas(double value) {
  return with_commas(static_cast<int64_t>(value));
}

// A preset or config.json is valid already; edited by --vocab or --attention-bias, it is a new
// configuration and checked once here.
ModelConfig with_overrides(ModelConfig config, const InfoOptions& options) {
  if (options.vocab_size <= 0 && !options.attention_bias) return config;
  if (options.vocab_size > 0) config.vocab_size = options.vocab_size;
  if (options.attention_bias) config.attention_bias = true;
  validate(config);
  return config;
}

Subject resolve_subject(const InfoOptions& options) {
  if (!options.model_dir.empty()) {
    // Only config.json is read: the parameter count follows from it, and the weights may be large.
    const std::filesystem::path dir = options.model_dir;
    std::error_code ec;
    TFM_CHECK(std::filesystem::is_directory(dir, ec), "model directory '{}' does not exist",
              dir.string());
    return {"model " + dir.string(), std::nullopt, load_config(dir / kConfigFileName)};
  }
  if (!options.config_file.empty())
    return {"config " + options.config_file, std::nullopt,
            with_overrides(load_config(options.config_file), options)};
  return {"preset " + options.preset, options.preset,
          with_overrides(preset(options.preset), options)};
}

nlohmann::ordered_json parameters_json(const ModelConfig& config) {
  const ParameterBreakdown parts = parameter_breakdown(config);
  return {{"total", parts.total()},
          {"embedding", parts.embedding},
          {"positions", parts.positions},
          {"encoder", parts.encoder},
          {"decoder", parts.decoder}};
}

nlohmann::ordered_json flops_json(const ForwardFlops& f) {
  return {{"source_length", f.source_length},
          {"target_length", f.target_length},
          {"encoder", f.encoder},
          {"decoder", f.decoder},
          {"output_projection", f.output},
          {"per_pair", f.per_pair()},
          {"per_source_token", f.per_source_token()},
          {"per_target_token", f.per_target_token()},
          {"per_token", f.per_token()}};
}

void print_one(const Subject& subject, const ForwardFlops& flops) {
  const ModelConfig& c = subject.config;
  const ParameterBreakdown parts = parameter_breakdown(c);
  std::string text = fmt::format("configuration ({})\n", subject.label);
  auto row = [&text](std::string_view key, const auto& value) {
    text += fmt::format("  {:<20}{}\n", key, value);
  };
  row("N (layers)", c.layers);
  if (c.decoder_layers >= 0) row("decoder layers", c.decoder_layers);
  row("d_model", c.d_model);
  row("d_ff", c.d_ff);
  row("h (heads)", c.heads);
  row("d_k", c.d_k);
  row("d_v", c.d_v);
  row("P_drop", c.dropout);
  row("eps_ls", c.label_smoothing);
  row("positional", c.positional);
  row("vocab_size", c.vocab_size);
  row("max_positions", c.max_positions);
  row("norm", c.norm);
  row("attention_bias", c.attention_bias);
  row("attention_dropout", c.attention_dropout);
  row("layer_norm_eps", c.layer_norm_eps);
  row("token ids",
      fmt::format("pad {}, unk {}, bos {}, eos {}", c.pad_id, c.unk_id, c.bos_id, c.eos_id));
  // The variant keys of other toolkits' models, only those off the paper's values.
  const nlohmann::ordered_json written = config_to_json(c);
  std::string variants;
  for (const char* key : {"activation", "tie_embeddings", "output_bias", "scale_embeddings",
                          "sinusoid", "position_offset", "decoder_start_id"})
    if (written.contains(key))
      variants += fmt::format("{}{} {}", variants.empty() ? "" : ", ", key, written[key].dump());
  if (!variants.empty()) row("variants", variants);
  text += fmt::format("parameters              {} ({:.2f} M)\n", with_commas(parts.total()),
                      static_cast<double>(parts.total()) / 1e6);
  row(c.tie_embeddings == "all" && !c.output_bias ? "embedding (shared)" : "vocabulary matrices",
      with_commas(parts.embedding));
  row("positions", with_commas(parts.positions));
  row("encoder", with_commas(parts.encoder));
  row("decoder", with_commas(parts.decoder));
  text += fmt::format(
      "forward FLOPs (source length {}, target length {}; matrix products only, multiply-add = 2 "
      "FLOPs, full attention)\n",
      flops.source_length, flops.target_length);
  row("per source token", with_commas(flops.per_source_token()) + "  (encoder)");
  row("per target token",
      with_commas(flops.per_target_token()) + "  (decoder + output projection)");
  row("per sentence pair", with_commas(flops.per_pair()));
  row("per token", with_commas(flops.per_token()) + "  (pair / (source + target length))");
  std::fputs(text.c_str(), stdout);
}

void print_all_presets(const InfoOptions& options, int64_t source_length, int64_t target_length) {
  std::string text = fmt::format(
      "{:<6}{:>3}{:>9}{:>6}{:>4}{:>5}{:>5}{:>8}{:>8}  {:<11}{:>8}{:>14}{:>11}{:>10}{:>15}\n",
      "preset", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "positional",
      "vocab", "params", "params(M)", "paper(M)", "GFLOP/token");
  for (const std::string& name : preset_names()) {
    const ModelConfig c = with_overrides(preset(name), options);
    const std::optional<int> paper = paper_params_millions(name);
    const int64_t count = parameter_count(c);
    text += fmt::format(
        "{:<6}{:>3}{:>9}{:>6}{:>4}{:>5}{:>5}{:>8}{:>8}  "
        "{:<11}{:>8}{:>14}{:>11.2f}{:>10}{:>15.4f}\n",
        name, c.layers, c.d_model, c.d_ff, c.heads, c.d_k, c.d_v, c.dropout, c.label_smoothing,
        c.positional, c.vocab_size, with_commas(count), static_cast<double>(count) / 1e6,
        paper ? std::to_string(*paper) : "-",
        forward_flops(c, source_length, target_length).per_token() / 1e9);
  }
  text += fmt::format(
      "paper(M): Table 3's params x 10^6 ('-': blank in the paper, i.e. as base). GFLOP/token: "
      "forward, source length {}, target length {}.\n",
      source_length, target_length);
  std::fputs(text.c_str(), stdout);
}

void run_info(const InfoOptions& options) {
  if (options.cpu) {
    std::fputs(ops::describe_cpu().c_str(), stdout);
    return;
  }
  TFM_CHECK(!options.vocab_given || options.vocab_size > 0, "--vocab must be positive, got {}",
            options.vocab_size);
  TFM_CHECK(options.length > 0, "--length must be positive, got {}", options.length);
  const int64_t source_length = options.source_length >= 0 ? options.source_length : options.length;
  const int64_t target_length = options.target_length >= 0 ? options.target_length : options.length;
  TFM_CHECK(source_length > 0 && target_length > 0,
            "--source-length and --target-length must be positive, got {} and {}", source_length,
            target_length);

  if (options.all_presets) {
    if (!options.json) return print_all_presets(options, source_length, target_length);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const std::string& name : preset_names()) {
      const ModelConfig c = with_overrides(preset(name), options);
      const std::optional<int> paper = paper_params_millions(name);
      rows.push_back({{"preset", name},
                      {"config", config_to_json(c)},
                      {"parameters", parameters_json(c)},
                      {"paper_params_millions", paper ? nlohmann::ordered_json(*paper) : nullptr},
                      {"flops", flops_json(forward_flops(c, source_length, target_length))}});
    }
    std::printf("%s\n", nlohmann::ordered_json{{"presets", rows}}.dump(2).c_str());
    return;
  }

  const Subject subject = resolve_subject(options);
  const ForwardFlops flops = forward_flops(subject.config, source_length, target_length);
  if (!options.json) return print_one(subject, flops);
  nlohmann::ordered_json out;
  out["preset"] = subject.preset ? nlohmann::ordered_json(*subject.preset) : nullptr;
  if (!options.model_dir.empty()) out["model_dir"] = options.model_dir;
  if (!options.config_file.empty()) out["config_file"] = options.config_file;
  out["config"] = config_to_json(subject.config);
  out["parameters"] = parameters_json(subject.config);
  out["flops"] = flops_json(flops);
  std::printf("%s\n", out.dump(2).c_str());
}

}  // namespace

void register_info(CLI::App& app) {
  CLI::App* cmd =
      app.add_subcommand("info", "Print a configuration's parameter count and FLOPs per token");
  auto options = std::make_shared<InfoOptions>();
  CLI::Option* preset_option =
      cmd->add_option("-p,--preset", options->preset, "A named configuration (Table 3)")
          ->default_str("base");
  CLI::Option* model_option = cmd->add_option("-m,--model", options->model_dir,
                                              "A model directory (reads its config.json)");
  CLI::Option* config_option =
      cmd->add_option("-c,--config", options->config_file, "A config.json file");
  CLI::Option* all_option =
      cmd->add_flag("--all-presets", options->all_presets, "One table row per preset");
  CLI::Option* vocab_option =
      cmd->add_option("--vocab", options->vocab_size,
                      "Vocabulary size for a preset or config (default: the configuration's, "
                      "37000 for presets)")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  CLI::Option* bias_option = cmd->add_flag("--attention-bias", options->attention_bias,
                                           "Add biases to the attention projections");
  cmd->add_option("--length", options->length,
                  "Source and target length for the FLOP count (default 25)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--source-length", options->source_length, "Source length (default --length)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--target-length", options->target_length, "Target length (default --length)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  CLI::Option* json_option = cmd->add_flag("--json", options->json, "Machine-readable output");
  CLI::Option* cpu_option = cmd->add_flag(
      "--cpu", options->cpu,
      "The CPU's instruction-set levels, the one in use and why (TFM_CPU_ISA chooses a lower one), "
      "and what decides precision auto");

  model_option->excludes(preset_option)->excludes(config_option)->excludes(all_option);
  model_option->excludes(vocab_option)->excludes(bias_option);
  config_option->excludes(preset_option)->excludes(all_option);
  all_option->excludes(preset_option);
  for (CLI::Option* other : {preset_option, model_option, config_option, all_option, vocab_option,
                             bias_option, json_option})
    cpu_option->excludes(other);

  cmd->callback([options, vocab_option] {
    options->vocab_given = vocab_option->count() > 0;
    run_info(*options);
  });
}

}  // namespace tfm::internal::cli
