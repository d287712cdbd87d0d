// The model configuration: the columns of the paper's Table 3 plus vocabulary, positional encoding,
// norm placement and the special token ids. Stored as config.json in a model directory
// (docs/MODEL_FORMAT.md documents every key). The defaults are the paper's base model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::internal {

struct ModelConfig {
  int64_t layers = 6;  // N: encoder layers, and as many decoder layers unless decoder_layers
  int64_t d_model = 512;
  int64_t d_ff = 2048;
  int64_t heads = 8;                      // h
  int64_t d_k = 64;                       // per head, queries and keys
  int64_t d_v = 64;                       // per head, values
  double dropout = 0.1;                   // P_drop: sub-layer outputs and embedding + position sums
  double attention_dropout = 0.0;         // on the attention weights
  double label_smoothing = 0.1;           // eps_ls
  std::string positional = "sinusoidal";  // "sinusoidal" or "learned" (Table 3 row E)
  int64_t max_positions = 1024;  // rows of the learned tables, and the longest sequence accepted
  int64_t vocab_size = 37000;
  std::string norm = "post";    // "post": LayerNorm(x + Sublayer(x)) as in the paper; "pre": option
  bool attention_bias = false;  // biases on W^Q, W^K, W^V, W^O (off as in the paper)
  double layer_norm_eps = 1e-5;
  int32_t pad_id = 0;
  int32_t unk_id = 1;
  int32_t bos_id = 2;
  int32_t eos_id = 3;
  // What the model's outputs are: "translation" (text), or "parsing" (linearised trees,
  // data/tree_sequences.h: `tfm parse` reads these models, `tfm translate` refuses them).
  std::string task = "translation";
  // A parser's tree leaves (data/tree_sequences.h): "xx", every preterminal written as the
  // placeholder XX; or "words", as its word. Only "xx" with task "translation".
  std::string tree_leaves = "xx";

  // Variants of other toolkits' Transformers (docs/MODEL_FORMAT.md). The defaults are the paper's
  // model, and config.json leaves these keys out while they hold their defaults.
  std::string activation = "relu";  // of the FFN: "relu", "gelu" (erf form) or "swish" (x*sigmoid)
  std::string tie_embeddings = "all";    // "all", "decoder" (target = output) or "none"
  bool output_bias = false;              // a bias [V] added to the logits
  bool scale_embeddings = true;          // embeddings times sqrt(d_model)
  std::string sinusoid = "interleaved";  // "interleaved", "halves" or "halves_t2t"
  int64_t position_offset = 0;           // position p reads row p + position_offset
  int32_t decoder_start_id = -1;         // first decoder input; -1: bos_id
  // The decoder's N where it differs from the encoder's (a deep encoder with a shallow decoder,
  // as Marian's enc-depth/dec-depth); -1: as many as `layers`.
  int64_t decoder_layers = -1;

  bool learned_positions() const { return positional == "learned"; }
  bool pre_norm() const { return norm == "pre"; }
  // The first decoder input: decoder_start_id, or bos_id when it is -1.
  int32_t decoder_start() const { return decoder_start_id < 0 ? bos_id : decoder_start_id; }
  // The decoder's layers: decoder_layers, or `layers` when it is -1.
  int64_t decoder_depth() const { return decoder_layers < 0 ? layers : decoder_layers; }
  // The longest sequence a model takes: max_positions rows, the first position_offset unused.
  int64_t longest_sequence() const { return max_positions - position_offset; }

  bool operator==(const ModelConfig&) const = default;
};

// Every configuration key (config.json's keys, the field names), in file order.
std::span<const std::string_view> config_keys();

// Throws tfm::Error naming the first field that is out of its range (sizes not positive, dropout
// outside [0, 1), odd d_model with sinusoidal encoding, token ids outside the vocabulary or
// equal...).
//
// Validation happens once, where a configuration enters: config_from_json and load_config (a
// config.json, a recipe's model section through TrainRecipe::model_config) validate what they
// return, and every preset is valid (a test checks them all). Code that builds or edits a
// ModelConfig by hand (tfm info's --vocab, tests, benchmarks) calls validate() once before using
// it. Everything that takes a ModelConfig (parameter_specs, forward_flops, nn::Transformer, the
// trainer, the decoder) relies on that and does not validate again. save_config is the one other
// check: a config.json that load_config would refuse is never written.
void validate(const ModelConfig& config);

// The named presets: "base", "big" and the Table 3 rows "A1".."A4", "B1", "B2", "C1".."C7",
// "D1".."D4", "E", all valid. Unknown names throw tfm::Error listing the valid ones.
ModelConfig preset(std::string_view name);
const std::vector<std::string>& preset_names();
// The paper's Table 3 "params x 10^6" cell for a preset; empty where the paper leaves it blank
// (which the paper defines as "identical to the base model").
std::optional<int> paper_params_millions(std::string_view preset_name);

// JSON: every key of ModelConfig, by its field name. Reading starts from `defaults` and overrides
// the keys present; unknown keys, wrong types and invalid values throw tfm::Error naming the key.
// config_to_json keeps the keys in the order above (the order of config.json files).
nlohmann::ordered_json config_to_json(const ModelConfig& config);
ModelConfig config_from_json(const nlohmann::json& json, const ModelConfig& defaults = {});
ModelConfig config_from_json(const nlohmann::ordered_json& json, const ModelConfig& defaults = {});

// config.json files. Errors name the file. Saving is atomic (temporary file + rename).
ModelConfig load_config(const std::filesystem::path& path);
void save_config(const std::filesystem::path& path, const ModelConfig& config);

}  // namespace tfm::internal
