#include "tfm/convert/huggingface.h"

#include <algorithm>
#include <set>

#include "tfm/convert/files.h"
#include "tfm/core/error.h"
#include "tfm/io/safetensors.h"

namespace tfm::internal::convert {

namespace fs = std::filesystem;

namespace {

// The tensors of model.safetensors, each taken once; those left at the end are refused.
class Tensors {
 public:
  explicit Tensors(const fs::path& file) : file_(file.string()), st_(read_safetensors(file)) {}

  bool has(const std::string& name) const { return st_.contains(name) && !taken_.count(name); }

  Tensor take(const std::string& name, std::vector<int64_t> shape) {
    TFM_CHECK(st_.contains(name), "{}: tensor '{}' is missing", file_, name);
    Tensor tensor = st_.tensors.at(name);
    std::vector<int64_t> actual(tensor.shape().begin(), tensor.shape().end());
    TFM_CHECK(actual == shape, "{}: tensor '{}' has shape [{}], expected [{}]", file_, name,
              fmt::join(actual, ", "), fmt::join(shape, ", "));
    TFM_CHECK(tensor.dtype() == DType::f32, "{}: tensor '{}' is {}, expected F32", file_, name,
              safetensors_dtype_name(tensor.dtype()));
    taken_.insert(name);
    return tensor;
  }

  void check_all_used() const {
    for (const std::string& name : st_.names)
      TFM_CHECK(taken_.count(name), "{}: tensor '{}' is not read by tfm (an unsupported variant)",
                file_, name);
  }

  const std::string& file() const { return file_; }

 private:
  std::string file_;
  SafeTensors st_;
  std::set<std::string> taken_;
};

struct HfOptions {
  int64_t layers = 0, decoder_layers = 0, d_model = 0, d_ff = 0, heads = 0, vocab = 0;
  int64_t positions = 0;
  int64_t pad = 0, eos = 0, start = 0;
  std::string activation, tie;
  bool scale = true;
};

template <typename T>
T key(const nlohmann::json& json, const std::string& name, const std::string& file, T fallback) {
  if (!json.contains(name) || json[name].is_null()) return fallback;
  try {
    return json[name].get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: key '{}' has an unexpected value {}", file, name, json[name].dump());
  }
}

HfOptions read_options(const fs::path& path) {
  const nlohmann::json c = read_json(path);
  const std::string file = path.string();
  auto need = [&](bool ok, const std::string& what) {
    TFM_CHECK(ok, "{}: {} is not supported", file, what);
  };
  need(key<std::string>(c, "model_type", file, "") == "marian",
       "model_type '" + key<std::string>(c, "model_type", file, "") + "' (only marian)");
  for (const char* flag :
       {"normalize_before", "normalize_embedding", "add_final_layer_norm", "layernorm_embedding"})
    need(!key<bool>(c, flag, file, false), std::string(flag) + " true");
  HfOptions o;
  o.layers = key<int64_t>(c, "encoder_layers", file, 12);
  o.decoder_layers = key<int64_t>(c, "decoder_layers", file, 12);
  need(o.layers >= 1 && o.decoder_layers >= 1,
       fmt::format("encoder_layers {} with decoder_layers {} (each at least 1)", o.layers,
                   o.decoder_layers));
  o.d_model = key<int64_t>(c, "d_model", file, 1024);
  o.heads = key<int64_t>(c, "encoder_attention_heads", file, 16);
  need(key<int64_t>(c, "decoder_attention_heads", file, 16) == o.heads,
       "decoder_attention_heads other than encoder_attention_heads");
  o.d_ff = key<int64_t>(c, "encoder_ffn_dim", file, 4096);
  need(key<int64_t>(c, "decoder_ffn_dim", file, 4096) == o.d_ff,
       "decoder_ffn_dim other than encoder_ffn_dim");
  o.vocab = key<int64_t>(c, "vocab_size", file, 58101);
  need(key<int64_t>(c, "decoder_vocab_size", file, o.vocab) == o.vocab,
       "decoder_vocab_size other than vocab_size");
  o.positions = key<int64_t>(c, "max_position_embeddings", file, 1024);
  o.activation = key<std::string>(c, "activation_function", file, "gelu");
  if (o.activation == "silu") o.activation = "swish";
  need(o.activation == "swish" || o.activation == "relu" || o.activation == "gelu",
       "activation_function '" + o.activation + "' (swish/silu, relu, gelu)");
  o.scale = key<bool>(c, "scale_embedding", file, false);
  o.pad = key<int64_t>(c, "pad_token_id", file, 58100);
  o.eos = key<int64_t>(c, "eos_token_id", file, 0);
  o.start = key<int64_t>(c, "decoder_start_token_id", file, 58100);
  const bool shared = key<bool>(c, "share_encoder_decoder_embeddings", file, true);
  const bool tied_output = key<bool>(c, "tie_word_embeddings", file, true);
  o.tie = tied_output ? (shared ? "all" : "decoder") : "none";
  need(o.heads > 0 && o.d_model % o.heads == 0, "d_model not a multiple of the heads");
  return o;
}

// The embedding matrices: Hugging Face writes one copy of tied weights (model.shared.weight, or
// one of the names tied to it); every copy present must match the configuration's tying.
void take_embeddings(Tensors& t, const HfOptions& o, ImportedModel& m) {
  const std::vector<int64_t> shape = {o.vocab, o.d_model};
  auto first_of = [&](std::initializer_list<const char*> names) -> Tensor {
    Tensor found;
    for (const char* name : names)
      if (t.has(name)) {
        Tensor tensor = t.take(name, shape);
        if (!found.defined()) found = tensor;
      }
    TFM_CHECK(found.defined(), "{}: tensor '{}' is missing", t.file(), *names.begin());
    return found;
  };
  if (o.tie == "all") {
    m.parameters.emplace_back("embedding.weight",
                              first_of({"model.shared.weight", "model.encoder.embed_tokens.weight",
                                        "model.decoder.embed_tokens.weight", "lm_head.weight"}));
    return;
  }
  m.parameters.emplace_back("source_embedding.weight",
                            first_of({"model.encoder.embed_tokens.weight"}));
  if (o.tie == "decoder") {
    m.parameters.emplace_back("target_embedding.weight",
                              first_of({"model.decoder.embed_tokens.weight", "lm_head.weight"}));
    return;
  }
  m.parameters.emplace_back("target_embedding.weight",
                            first_of({"model.decoder.embed_tokens.weight"}));
  m.parameters.emplace_back("output_projection.weight", first_of({"lm_head.weight"}));
}

void take_linear(Tensors& t, const std::string& from, const std::string& to, int64_t out,
                 int64_t in, ImportedModel& m) {
  m.parameters.emplace_back(to + ".weight", t.take(from + ".weight", {out, in}));
  m.parameters.emplace_back(to + ".bias", t.take(from + ".bias", {out}));
}

void take_norm(Tensors& t, const std::string& from, const std::string& to, int64_t d,
               ImportedModel& m) {
  m.parameters.emplace_back(to + ".weight", t.take(from + ".weight", {d}));
  m.parameters.emplace_back(to + ".bias", t.take(from + ".bias", {d}));
}

void take_attention(Tensors& t, const std::string& from, const std::string& to, int64_t d,
                    ImportedModel& m) {
  for (const char* p : {"q_proj", "k_proj", "v_proj", "out_proj"})
    take_linear(t, from + "." + p, to + "." + p, d, d, m);
}

void take_layers(Tensors& t, const HfOptions& o, ImportedModel& m) {
  const int64_t d = o.d_model;
  for (const std::string side : {"encoder", "decoder"}) {
    for (int64_t i = 0; i < (side == "encoder" ? o.layers : o.decoder_layers); ++i) {
      const std::string hf = fmt::format("model.{}.layers.{}", side, i);
      const std::string tfm = fmt::format("{}.layers.{}", side, i);
      take_attention(t, hf + ".self_attn", tfm + ".self_attn", d, m);
      take_norm(t, hf + ".self_attn_layer_norm", tfm + ".self_attn_norm", d, m);
      if (side == "decoder") {
        take_attention(t, hf + ".encoder_attn", tfm + ".cross_attn", d, m);
        take_norm(t, hf + ".encoder_attn_layer_norm", tfm + ".cross_attn_norm", d, m);
      }
      take_linear(t, hf + ".fc1", tfm + ".ffn.fc1", o.d_ff, d, m);
      take_linear(t, hf + ".fc2", tfm + ".ffn.fc2", d, o.d_ff, m);
      take_norm(t, hf + ".final_layer_norm", tfm + ".ffn_norm", d, m);
    }
  }
}

// vocab.json ({piece: id}) as the id table.
std::vector<std::string> read_vocab_json(const fs::path& path, int64_t size) {
  const nlohmann::json vocab = read_json(path);
  TFM_CHECK(vocab.is_object(), "{}: not a JSON object of piece: id", path.string());
  std::vector<std::string> pieces(static_cast<size_t>(size));
  std::vector<bool> seen(static_cast<size_t>(size), false);
  for (const auto& [piece, id] : vocab.items()) {
    TFM_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < size,
              "{}: piece '{}' has id {}, outside the model's vocab_size {}", path.string(),
              one_line(piece), id.dump(), size);
    const auto at = static_cast<size_t>(id.get<int64_t>());
    TFM_CHECK(!seen[at], "{}: id {} given twice", path.string(), at);
    seen[at] = true;
    pieces[at] = piece;
  }
  for (size_t i = 0; i < seen.size(); ++i)
    TFM_CHECK(seen[i], "{}: id {} has no piece (vocab_size is {})", path.string(), i, size);
  return pieces;
}

}  // namespace

ImportedModel import_huggingface(const fs::path& source) {
  TFM_CHECK(fs::is_directory(source), "{}: not a directory (give the model's folder)",
            source.string());
  const HfOptions o = read_options(source / "config.json");
  Tensors t(source / "model.safetensors");
  ImportedModel m;
  m.pieces = read_vocab_json(source / "vocab.json", o.vocab);
  const fs::path vocab = source / "vocab.json";
  TFM_CHECK(m.pieces[static_cast<size_t>(o.eos)] == "</s>" &&
                m.pieces[static_cast<size_t>(o.pad)] == "<pad>",
            "{}: eos_token_id {} and pad_token_id {} must be </s> and <pad>", vocab.string(), o.eos,
            o.pad);
  const auto unk = std::find(m.pieces.begin(), m.pieces.end(), "<unk>");
  TFM_CHECK(unk != m.pieces.end(), "{}: has no <unk>", vocab.string());
  take_embeddings(t, o, m);
  // Generation forbids <pad> (bad_words_ids = [[pad_token_id]]): as a bias that tfm's search obeys.
  Tensor bias = flattened(t.take("final_logits_bias", {1, o.vocab})).clone();
  bias.data<float>()[o.pad] = kNeverBias;
  m.parameters.emplace_back("output_projection.bias", bias);
  // The sinusoid tables Hugging Face stores are computed, not trained: tfm computes the same.
  for (const char* side : {"encoder", "decoder"}) {
    const std::string name = fmt::format("model.{}.embed_positions.weight", side);
    if (t.has(name)) t.take(name, {o.positions, o.d_model});
  }
  take_layers(t, o, m);
  t.check_all_used();
  m.config = {{"layers", o.layers},
              {"d_model", o.d_model},
              {"d_ff", o.d_ff},
              {"heads", o.heads},
              {"d_k", o.d_model / o.heads},
              {"d_v", o.d_model / o.heads},
              {"positional", "sinusoidal"},
              {"max_positions", o.positions},
              {"vocab_size", o.vocab},
              {"norm", "post"},
              {"attention_bias", true},
              {"layer_norm_eps", 1e-5},  // torch.nn.LayerNorm's default, as modeling_marian uses
              {"pad_id", o.pad},
              {"unk_id", unk - m.pieces.begin()},
              {"eos_id", o.eos},
              {"activation", o.activation},
              {"tie_embeddings", o.tie},
              {"output_bias", true},
              {"scale_embeddings", o.scale},
              {"sinusoid", "halves"},
              {"decoder_start_id", o.start}};
  if (o.decoder_layers != o.layers) m.config["decoder_layers"] = o.decoder_layers;
  // tfm's configuration needs a <s> apart from <pad> (MarianConfig's bos_token_id is eos's): a zero
  // row that is never an output.
  m.config["bos_id"] = append_token(m, "<s>");
  m.source_spm = read_bytes(source / "source.spm");
  m.target_spm = read_bytes(source / "target.spm");
  return m;
}

}  // namespace tfm::internal::convert
