#include "tfm/model/config.h"

#include <array>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/key_table.h"
#include "tfm/io/text_reader.h"

namespace tfm::internal {

namespace {

// Every dimension is capped so that products of a few of them cannot overflow int64 (and the whole
// model is checked against a parameter budget in validate()).
constexpr int64_t kMaxDimension = int64_t{1} << 24;
// The longest sequence is bounded far lower: attention holds a length x length score matrix per
// head, 16 GiB of f32 at this bound, so no longer input can be translated or trained on anyway.
constexpr int64_t kMaxPositions = int64_t{1} << 16;
// The deepest Transformers trained (DeepNet) have 1000 layers; a config asking for millions is a
// damaged file, and its parameter list alone would take gigabytes.
constexpr int64_t kMaxLayers = 1024;

void check_dimension(std::string_view key, int64_t value) {
  TFM_CHECK(value > 0, "configuration key '{}' must be positive, got {}", key, value);
  TFM_CHECK(value <= kMaxDimension, "configuration key '{}' must be at most {}, got {}", key,
            kMaxDimension, value);
}

void check_probability(std::string_view key, double value) {
  TFM_CHECK(value >= 0.0 && value < 1.0, "configuration key '{}' must be in [0, 1), got {}", key,
            value);
}

void check_token_id(std::string_view key, int32_t id, int64_t vocab_size) {
  TFM_CHECK(id >= 0 && id < vocab_size,
            "configuration key '{}' must be a token id in [0, vocab_size) = [0, {}), got {}", key,
            vocab_size, id);
}

// A value as JSON text for an error message; invalid UTF-8 (a recipe's raw bytes) is replaced, not
// thrown as nlohmann's type_error.
std::string shown(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int64_t read_integer(std::string_view key, const nlohmann::json& value) {
  TFM_CHECK(value.is_number_integer(), "configuration key '{}' must be an integer, got {} {}", key,
            value.type_name(), shown(value));
  if (value.is_number_unsigned()) {
    auto u = value.get<uint64_t>();
    TFM_CHECK(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
              "configuration key '{}' is out of range: {}", key, u);
    return static_cast<int64_t>(u);
  }
  return value.get<int64_t>();
}

int32_t read_token_id(std::string_view key, const nlohmann::json& value) {
  int64_t id = read_integer(key, value);
  TFM_CHECK(id >= 0 && id <= std::numeric_limits<int32_t>::max(),
            "configuration key '{}' must be a non-negative token id, got {}", key, id);
  return static_cast<int32_t>(id);
}

// decoder_start_id: a token id, or -1 for "the bos_id".
int32_t read_start_id(std::string_view key, const nlohmann::json& value) {
  int64_t id = read_integer(key, value);
  TFM_CHECK(id >= -1 && id <= std::numeric_limits<int32_t>::max(),
            "configuration key '{}' must be a token id or -1 (the bos_id), got {}", key, id);
  return static_cast<int32_t>(id);
}

double read_number(std::string_view key, const nlohmann::json& value) {
  TFM_CHECK(value.is_number(), "configuration key '{}' must be a number, got {} {}", key,
            value.type_name(), shown(value));
  return value.get<double>();
}

std::string read_string(std::string_view key, const nlohmann::json& value) {
  TFM_CHECK(value.is_string(), "configuration key '{}' must be a string, got {} {}", key,
            value.type_name(), shown(value));
  return value.get<std::string>();
}

bool read_bool(std::string_view key, const nlohmann::json& value) {
  TFM_CHECK(value.is_boolean(), "configuration key '{}' must be true or false, got {} {}", key,
            value.type_name(), shown(value));
  return value.get<bool>();
}

// Rows of the key table from a field and its reader: the reader parses and checks a JSON value.
using ConfigRow = KeyRow<ModelConfig, nlohmann::json>;

template <typename Field, typename Reader>
ConfigRow row(std::string name, Field ModelConfig::*field, Reader read) {
  return {std::move(name),
          [field, read](ModelConfig& c, const std::string& key, const nlohmann::json& value) {
            c.*field = read(key, value);
          },
          [field](const ModelConfig& c) { return nlohmann::ordered_json(c.*field); }};
}

// Every key of config.json, in file order (docs/MODEL_FORMAT.md).
const KeyTable<ModelConfig, nlohmann::json>& config_table() {
  static const KeyTable<ModelConfig, nlohmann::json> table({
      row("layers", &ModelConfig::layers, read_integer),
      row("d_model", &ModelConfig::d_model, read_integer),
      row("d_ff", &ModelConfig::d_ff, read_integer),
      row("heads", &ModelConfig::heads, read_integer),
      row("d_k", &ModelConfig::d_k, read_integer),
      row("d_v", &ModelConfig::d_v, read_integer),
      row("dropout", &ModelConfig::dropout, read_number),
      row("attention_dropout", &ModelConfig::attention_dropout, read_number),
      row("label_smoothing", &ModelConfig::label_smoothing, read_number),
      row("positional", &ModelConfig::positional, read_string),
      row("max_positions", &ModelConfig::max_positions, read_integer),
      row("vocab_size", &ModelConfig::vocab_size, read_integer),
      row("norm", &ModelConfig::norm, read_string),
      row("attention_bias", &ModelConfig::attention_bias, read_bool),
      row("layer_norm_eps", &ModelConfig::layer_norm_eps, read_number),
      row("pad_id", &ModelConfig::pad_id, read_token_id),
      row("unk_id", &ModelConfig::unk_id, read_token_id),
      row("bos_id", &ModelConfig::bos_id, read_token_id),
      row("eos_id", &ModelConfig::eos_id, read_token_id),
      row("task", &ModelConfig::task, read_string),
      row("tree_leaves", &ModelConfig::tree_leaves, read_string),
      row("activation", &ModelConfig::activation, read_string),
      row("tie_embeddings", &ModelConfig::tie_embeddings, read_string),
      row("output_bias", &ModelConfig::output_bias, read_bool),
      row("scale_embeddings", &ModelConfig::scale_embeddings, read_bool),
      row("sinusoid", &ModelConfig::sinusoid, read_string),
      row("position_offset", &ModelConfig::position_offset, read_integer),
      row("decoder_start_id", &ModelConfig::decoder_start_id, read_start_id),
      row("decoder_layers", &ModelConfig::decoder_layers, read_integer),
  });
  return table;
}

// The keys of the model variants (config.h) and tree_leaves: config.json holds them only when
// they differ from the default, so that a model of the paper's architecture (or a parser with the
// placeholder scheme) writes the same file as before them.
constexpr std::array<std::string_view, 9> kVariantKeys = {
    "tree_leaves", "activation",      "tie_embeddings",   "output_bias",   "scale_embeddings",
    "sinusoid",    "position_offset", "decoder_start_id", "decoder_layers"};

void check_choice(std::string_view key, const std::string& value,
                  std::initializer_list<std::string_view> valid) {
  for (std::string_view v : valid)
    if (value == v) return;
  std::string list;
  for (std::string_view v : valid) list += (list.empty() ? "\"" : ", \"") + std::string(v) + "\"";
  fail("configuration key '{}' must be one of {}, got \"{}\"", key, list, value);
}

void validate_variants(const ModelConfig& c) {
  check_choice("activation", c.activation, {"relu", "gelu", "swish"});
  check_choice("tie_embeddings", c.tie_embeddings, {"all", "decoder", "none"});
  check_choice("sinusoid", c.sinusoid, {"interleaved", "halves", "halves_t2t"});
  // halves_t2t divides by d_model / 2 - 1.
  TFM_CHECK(c.sinusoid != "halves_t2t" || c.positional != "sinusoidal" || c.d_model >= 4,
            "configuration key 'sinusoid' \"halves_t2t\" needs d_model >= 4, got {}", c.d_model);
  TFM_CHECK(c.position_offset >= 0 && c.position_offset < c.max_positions,
            "configuration key 'position_offset' must be in [0, max_positions) = [0, {}), got {}",
            c.max_positions, c.position_offset);
  TFM_CHECK(c.decoder_start_id >= -1 && c.decoder_start_id < c.vocab_size,
            "configuration key 'decoder_start_id' must be -1 (the bos_id) or a token id in [0, "
            "vocab_size) = [0, {}), got {}",
            c.vocab_size, c.decoder_start_id);
  TFM_CHECK(c.decoder_layers == -1 || (c.decoder_layers >= 1 && c.decoder_layers <= kMaxLayers),
            "configuration key 'decoder_layers' must be -1 (as many as 'layers') or in [1, {}], "
            "got {}",
            kMaxLayers, c.decoder_layers);
}

template <typename Json>
ModelConfig from_json(const Json& json, const ModelConfig& defaults) {
  TFM_CHECK(json.is_object(), "a model configuration must be a JSON object, got {}",
            json.type_name());
  ModelConfig c = defaults;
  for (auto it = json.begin(); it != json.end(); ++it)
    if (!config_table().set(c, it.key(), nlohmann::json(it.value())))
      fail("unknown configuration key '{}' (valid keys: {})", it.key(),
           joined_names(config_table().names()));
  validate(c);
  return c;
}

struct Preset {
  std::string_view name;
  void (*apply)(ModelConfig&);
  std::optional<int> paper_params_millions;
};

// Table 3, top to bottom; unlisted values are those of base.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"base", [](ModelConfig&) {}, 65},
      {"A1", [](ModelConfig& c) { c.heads = 1, c.d_k = 512, c.d_v = 512; }, std::nullopt},
      {"A2", [](ModelConfig& c) { c.heads = 4, c.d_k = 128, c.d_v = 128; }, std::nullopt},
      {"A3", [](ModelConfig& c) { c.heads = 16, c.d_k = 32, c.d_v = 32; }, std::nullopt},
      {"A4", [](ModelConfig& c) { c.heads = 32, c.d_k = 16, c.d_v = 16; }, std::nullopt},
      {"B1", [](ModelConfig& c) { c.d_k = 16; }, 58},
      {"B2", [](ModelConfig& c) { c.d_k = 32; }, 60},
      {"C1", [](ModelConfig& c) { c.layers = 2; }, 36},
      {"C2", [](ModelConfig& c) { c.layers = 4; }, 50},
      {"C3", [](ModelConfig& c) { c.layers = 8; }, 80},
      {"C4", [](ModelConfig& c) { c.d_model = 256, c.d_k = 32, c.d_v = 32; }, 28},
      {"C5", [](ModelConfig& c) { c.d_model = 1024, c.d_k = 128, c.d_v = 128; }, 168},
      {"C6", [](ModelConfig& c) { c.d_ff = 1024; }, 53},
      {"C7", [](ModelConfig& c) { c.d_ff = 4096; }, 90},
      {"D1", [](ModelConfig& c) { c.dropout = 0.0; }, std::nullopt},
      {"D2", [](ModelConfig& c) { c.dropout = 0.2; }, std::nullopt},
      {"D3", [](ModelConfig& c) { c.label_smoothing = 0.0; }, std::nullopt},
      {"D4", [](ModelConfig& c) { c.label_smoothing = 0.2; }, std::nullopt},
      {"E", [](ModelConfig& c) { c.positional = "learned"; }, std::nullopt},
      {"big",
       [](ModelConfig& c) {
         c.d_model = 1024, c.d_ff = 4096, c.heads = 16, c.d_k = 64, c.d_v = 64, c.dropout = 0.3;
       },
       213},
  };
  return table;
}

const Preset& find_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (p.name == name) return p;
  std::string valid;
  for (const std::string& n : preset_names()) valid += (valid.empty() ? "" : ", ") + n;
  fail("unknown preset '{}' (valid presets: {})", name, valid);
}

}  // namespace

void validate(const ModelConfig& c) {
  check_dimension("layers", c.layers);
  TFM_CHECK(c.layers <= kMaxLayers, "configuration key 'layers' must be at most {}, got {}",
            kMaxLayers, c.layers);
  check_dimension("d_model", c.d_model);
  check_dimension("d_ff", c.d_ff);
  check_dimension("heads", c.heads);
  check_dimension("d_k", c.d_k);
  check_dimension("d_v", c.d_v);
  check_dimension("max_positions", c.max_positions);
  TFM_CHECK(c.max_positions <= kMaxPositions,
            "configuration key 'max_positions' must be at most {} (attention needs a length x "
            "length matrix per head), got {}",
            kMaxPositions, c.max_positions);
  check_dimension("vocab_size", c.vocab_size);
  check_probability("dropout", c.dropout);
  check_probability("attention_dropout", c.attention_dropout);
  check_probability("label_smoothing", c.label_smoothing);
  TFM_CHECK(c.positional == "sinusoidal" || c.positional == "learned",
            "configuration key 'positional' must be \"sinusoidal\" or \"learned\", got \"{}\"",
            c.positional);
  // The interleaved sin/cos encoding fills dimensions in pairs.
  TFM_CHECK(c.positional != "sinusoidal" || c.d_model % 2 == 0,
            "configuration key 'd_model' must be even with sinusoidal positional encoding, got {}",
            c.d_model);
  TFM_CHECK(c.norm == "post" || c.norm == "pre",
            "configuration key 'norm' must be \"post\" or \"pre\", got \"{}\"", c.norm);
  TFM_CHECK(c.task == "translation" || c.task == "parsing",
            "configuration key 'task' must be \"translation\" or \"parsing\", got \"{}\"", c.task);
  check_choice("tree_leaves", c.tree_leaves, {"xx", "words"});
  TFM_CHECK(c.tree_leaves == "xx" || c.task == "parsing",
            "configuration key 'tree_leaves' \"{}\" needs task \"parsing\", got task \"{}\"",
            c.tree_leaves, c.task);
  TFM_CHECK(std::isfinite(c.layer_norm_eps) && c.layer_norm_eps > 0.0,
            "configuration key 'layer_norm_eps' must be positive, got {}", c.layer_norm_eps);
  const std::array<std::pair<std::string_view, int32_t>, 4> ids = {
      {{"pad_id", c.pad_id}, {"unk_id", c.unk_id}, {"bos_id", c.bos_id}, {"eos_id", c.eos_id}}};
  for (size_t i = 0; i < ids.size(); ++i) {
    check_token_id(ids[i].first, ids[i].second, c.vocab_size);
    for (size_t j = 0; j < i; ++j)
      TFM_CHECK(ids[i].second != ids[j].second,
                "configuration keys '{}' and '{}' must be different token ids, both are {}",
                ids[j].first, ids[i].first, ids[i].second);
  }
  validate_variants(c);
  // A generous upper bound on the parameter count, in floating point so that it cannot overflow.
  double d = static_cast<double>(c.d_model);
  double projections = static_cast<double>(c.heads) * static_cast<double>(c.d_k + c.d_v) * d * 4;
  double per_layer = 2 * projections + 4 * d * static_cast<double>(c.d_ff) + 16 * d;
  const double vocabulary_matrices = c.tie_embeddings == "all"       ? 1
                                     : c.tie_embeddings == "decoder" ? 2
                                                                     : 3;
  double estimate = (vocabulary_matrices * static_cast<double>(c.vocab_size) +
                     2 * static_cast<double>(c.max_positions)) *
                        d +
                    static_cast<double>(c.layers + c.decoder_depth()) * per_layer;
  TFM_CHECK(estimate < 1e15, "configuration describes about {:.3g} parameters, too many", estimate);
}

ModelConfig preset(std::string_view name) {
  ModelConfig config;
  find_preset(name).apply(config);
  return config;
}

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Preset& p : presets()) out.emplace_back(p.name);
    return out;
  }();
  return names;
}

std::optional<int> paper_params_millions(std::string_view preset_name) {
  return find_preset(preset_name).paper_params_millions;
}

std::span<const std::string_view> config_keys() {
  static const std::vector<std::string> names = config_table().names();
  static const std::vector<std::string_view> views(names.begin(), names.end());
  return views;
}

nlohmann::ordered_json config_to_json(const ModelConfig& c) {
  nlohmann::ordered_json json = config_table().to_json(c);
  const nlohmann::ordered_json defaults = config_table().to_json(ModelConfig{});
  for (std::string_view key : kVariantKeys)
    if (json[std::string(key)] == defaults[std::string(key)]) json.erase(std::string(key));
  return json;
}

ModelConfig config_from_json(const nlohmann::json& json, const ModelConfig& defaults) {
  return from_json(json, defaults);
}

ModelConfig config_from_json(const nlohmann::ordered_json& json, const ModelConfig& defaults) {
  return from_json(json, defaults);
}

ModelConfig load_config(const std::filesystem::path& path) {
  // A directory would open and read as empty ("not valid JSON"), a FIFO block.
  const std::optional<std::string> problem = file_type_problem(path);
  TFM_CHECK(!problem, "{}: cannot open the model configuration: {}", path.string(),
            problem.value_or(""));
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), "{}: cannot open the model configuration (no such file or not readable)",
            path.string());
  std::stringstream text;
  text << in.rdbuf();
  // A JSON object keeps the last of a repeated key; a configuration key given twice is refused.
  std::vector<std::set<std::string>> keys_seen;  // per open object
  auto refuse_repeated_keys = [&keys_seen, &path](int, nlohmann::ordered_json::parse_event_t event,
                                                  nlohmann::ordered_json& parsed) {
    using Event = nlohmann::ordered_json::parse_event_t;
    if (event == Event::object_start) keys_seen.emplace_back();
    if (event == Event::object_end) keys_seen.pop_back();
    if (event == Event::key)
      TFM_CHECK(keys_seen.back().insert(parsed.get<std::string>()).second,
                "{}: configuration key '{}' given twice", path.string(), parsed.get<std::string>());
    return true;
  };
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(text.str(), refuse_repeated_keys);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number beyond double (1e400).
    fail("{}: not valid JSON: {}", path.string(), e.what());
  }
  try {
    return from_json(json, ModelConfig{});
  } catch (const Error& e) {
    fail("{}: {}", path.string(), e.what());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: {}", path.string(), e.what());
  }
}

void save_config(const std::filesystem::path& path, const ModelConfig& config) {
  try {
    validate(config);
  } catch (const Error& e) {
    fail("{}: refusing to save an invalid configuration: {}", path.string(), e.what());
  }
  write_file_atomically(path, config_to_json(config).dump(2) + "\n");
}

}  // namespace tfm::internal
