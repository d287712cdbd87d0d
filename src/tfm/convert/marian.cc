#include "tfm/convert/marian.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <set>

#include "tfm/convert/files.h"
#include "tfm/convert/npz.h"
#include "tfm/core/error.h"

namespace tfm::internal::convert {

namespace fs = std::filesystem;

namespace {

// The arrays of the .npz, each taken once; what is left at the end is refused (an array tfm does
// not read would otherwise be dropped silently: a variant it does not know).
class Arrays {
 public:
  Arrays(const fs::path& file) : file_(file.string()), arrays_(read_npz(file)) {}

  bool has(const std::string& name) const { return arrays_.count(name) != 0; }
  int64_t rows(const std::string& name) const {
    const std::vector<int64_t>& shape = arrays_.at(name).shape;
    return shape.empty() ? 0 : shape[0];
  }
  const std::string& file() const { return file_; }

  // The array as F32 with the shape given (a [1, n] row for a vector of n, as Marian stores
  // biases and LayerNorm parameters, is accepted for [n]).
  Tensor take(const std::string& name, std::vector<int64_t> shape) {
    const auto it = arrays_.find(name);
    TFM_CHECK(it != arrays_.end(), "{}: array '{}' is missing", file_, name);
    std::vector<int64_t> actual = it->second.shape;
    if (shape.size() == 1 && actual.size() == 2 && actual[0] == 1) actual.erase(actual.begin());
    TFM_CHECK(actual == shape, "{}: array '{}' has shape [{}], expected [{}]", file_, name,
              fmt::join(it->second.shape, ", "), fmt::join(shape, ", "));
    Tensor tensor = it->second.to_f32(file_ + ": array '" + name + "'");
    arrays_.erase(it);
    return shape.size() == 1 ? flattened(tensor) : tensor;
  }

  std::string take_text(const std::string& name) {
    const auto it = arrays_.find(name);
    TFM_CHECK(it != arrays_.end(), "{}: array '{}' is missing (not a Marian model?)", file_, name);
    std::string text = it->second.bytes;
    while (!text.empty() && text.back() == '\0') text.pop_back();
    arrays_.erase(it);
    return text;
  }

  void check_all_used() const {
    if (arrays_.empty()) return;
    fail("{}: array '{}' is not read by tfm (an unsupported variant){}", file_,
         arrays_.begin()->first,
         arrays_.size() > 1 ? fmt::format(" (and {} more)", arrays_.size() - 1) : "");
  }

 private:
  std::string file_;
  std::map<std::string, NpyArray> arrays_;
};

// The options of special:model.yml that decide the architecture.
struct MarianOptions {
  int64_t layers = 0, decoder_layers = 0, d_model = 0, d_ff = 0, heads = 0, vocab = 0;
  std::string activation, tie;
  bool pre_norm = false;
};

template <typename T>
T option(const YAML::Node& yml, const std::string& key, const std::string& where, T fallback) {
  if (!yml[key]) return fallback;
  try {
    return yml[key].as<T>();
  } catch (const YAML::Exception&) {
    fail("{}: option '{}' has an unexpected value", where, key);
  }
}

MarianOptions read_options(const std::string& text, const std::string& where) {
  YAML::Node yml;
  try {
    yml = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("{}: special:model.yml is not YAML: {}", where, one_line(e.what()));
  }
  auto need = [&](bool ok, const std::string& what) {
    TFM_CHECK(ok, "{}: {} is not supported", where, what);
  };
  MarianOptions o;
  need(option<std::string>(yml, "type", where, "") == "transformer",
       "--type " + option<std::string>(yml, "type", where, "?") + " (only transformer)");
  need(option<std::string>(yml, "transformer-decoder-autoreg", where, "self-attention") ==
           "self-attention",
       "--transformer-decoder-autoreg other than self-attention");
  need(!option<bool>(yml, "transformer-no-projection", where, false),
       "--transformer-no-projection");
  need(!option<bool>(yml, "right-left", where, false), "--right-left");
  need(option<int64_t>(yml, "transformer-ffn-depth", where, 2) == 2,
       "--transformer-ffn-depth != 2");
  const int64_t decoder_ffn_depth = option<int64_t>(yml, "transformer-decoder-ffn-depth", where, 0);
  need(decoder_ffn_depth == 0 || decoder_ffn_depth == 2, "--transformer-decoder-ffn-depth != 2");
  const std::string emb = option<std::string>(yml, "transformer-postprocess-emb", where, "d");
  need(emb == "" || emb == "d", "--transformer-postprocess-emb '" + emb + "' (only '' or 'd')");
  const std::string pre = option<std::string>(yml, "transformer-preprocess", where, "");
  const std::string post = option<std::string>(yml, "transformer-postprocess", where, "dan");
  const std::string top = option<std::string>(yml, "transformer-postprocess-top", where, "");
  o.pre_norm = pre.find('n') != std::string::npos;
  need(o.pre_norm ? (pre == "n" && post == "da" && top == "n")
                  : (pre == "" && post == "dan" && top == ""),
       "the layer-norm placement --transformer-preprocess '" + pre +
           "' --transformer-postprocess '" + post + "' --transformer-postprocess-top '" + top +
           "' (post-norm: '' dan ''; pre-norm: n da n)");
  o.layers = option<int64_t>(yml, "enc-depth", where, 6);
  o.decoder_layers = option<int64_t>(yml, "dec-depth", where, 6);
  need(o.layers >= 1 && o.decoder_layers >= 1,
       fmt::format("enc-depth {} with dec-depth {} (each at least 1)", o.layers, o.decoder_layers));
  o.d_model = option<int64_t>(yml, "dim-emb", where, 512);
  o.d_ff = option<int64_t>(yml, "transformer-dim-ffn", where, 2048);
  const int64_t decoder_d_ff = option<int64_t>(yml, "transformer-decoder-dim-ffn", where, 0);
  need(decoder_d_ff == 0 || decoder_d_ff == o.d_ff, "a decoder FFN width other than the encoder's");
  o.heads = option<int64_t>(yml, "transformer-heads", where, 8);
  o.activation = option<std::string>(yml, "transformer-ffn-activation", where, "swish");
  need(o.activation == "swish" || o.activation == "relu" || o.activation == "gelu",
       "--transformer-ffn-activation " + o.activation + " (swish, relu, gelu)");
  const auto vocabs = option<std::vector<int64_t>>(yml, "dim-vocabs", where, {});
  need(vocabs.size() == 2 && vocabs[0] == vocabs[1],
       "dim-vocabs other than two equal sizes (one shared id table)");
  o.vocab = vocabs[0];
  need(o.heads > 0 && o.d_model % o.heads == 0, "dim-emb not a multiple of transformer-heads");
  return o;
}

// One attention block: Marian's <prefix>_W{q,k,v,o} [in, out] and _b{q,k,v,o} [1, out] as tfm's
// <name>.{q,k,v,out}_proj.{weight,bias}.
void take_attention(Arrays& a, const std::string& prefix, const std::string& name, int64_t d,
                    ImportedModel& m) {
  for (const auto& [marian, tfm] :
       {std::pair{"q", "q_proj"}, {"k", "k_proj"}, {"v", "v_proj"}, {"o", "out_proj"}}) {
    m.parameters.emplace_back(name + "." + tfm + ".weight",
                              transposed(a.take(prefix + "_W" + marian, {d, d})));
    m.parameters.emplace_back(name + "." + tfm + ".bias", a.take(prefix + "_b" + marian, {d}));
  }
}

void take_norm(Arrays& a, const std::string& prefix, bool pre, const std::string& name, int64_t d,
               ImportedModel& m) {
  const std::string suffix = pre ? "_pre" : "";
  m.parameters.emplace_back(name + ".weight", a.take(prefix + "_ln_scale" + suffix, {d}));
  m.parameters.emplace_back(name + ".bias", a.take(prefix + "_ln_bias" + suffix, {d}));
}

void take_ffn(Arrays& a, const std::string& prefix, const std::string& name, int64_t d,
              int64_t d_ff, ImportedModel& m) {
  m.parameters.emplace_back(name + ".fc1.weight", transposed(a.take(prefix + "_W1", {d, d_ff})));
  m.parameters.emplace_back(name + ".fc1.bias", a.take(prefix + "_b1", {d_ff}));
  m.parameters.emplace_back(name + ".fc2.weight", transposed(a.take(prefix + "_W2", {d_ff, d})));
  m.parameters.emplace_back(name + ".fc2.bias", a.take(prefix + "_b2", {d}));
}

void take_layers(Arrays& a, const MarianOptions& o, ImportedModel& m) {
  const int64_t d = o.d_model;
  for (const std::string side : {"encoder", "decoder"}) {
    for (int64_t i = 0; i < (side == "encoder" ? o.layers : o.decoder_layers); ++i) {
      const std::string marian = fmt::format("{}_l{}", side, i + 1);
      const std::string tfm = fmt::format("{}.layers.{}", side, i);
      take_attention(a, marian + "_self", tfm + ".self_attn", d, m);
      take_norm(a, marian + "_self_Wo", o.pre_norm, tfm + ".self_attn_norm", d, m);
      if (side == "decoder") {
        take_attention(a, marian + "_context", tfm + ".cross_attn", d, m);
        take_norm(a, marian + "_context_Wo", o.pre_norm, tfm + ".cross_attn_norm", d, m);
      }
      take_ffn(a, marian + "_ffn", tfm + ".ffn", d, o.d_ff, m);
      take_norm(a, marian + "_ffn_ffn", o.pre_norm, tfm + ".ffn_norm", d, m);
    }
  }
  if (o.pre_norm)
    for (const std::string side : {"encoder", "decoder"})
      take_norm(a, side + "_top", false, side + ".final_norm", d, m);
}

// The embeddings and the output layer (the <pad> and <s> rows are appended later).
std::string take_embeddings(Arrays& a, const MarianOptions& o, ImportedModel& m) {
  const int64_t d = o.d_model, v = o.vocab;
  std::string tie;
  if (a.has("Wemb") && !a.has("decoder_ff_logit_out_W")) {
    tie = "all";
    m.parameters.emplace_back("embedding.weight", a.take("Wemb", {v, d}));
  } else if (a.has("Wemb")) {  // --tied-embeddings-src: one embedding, its own output matrix
    tie = "none";
    const Tensor embedding = a.take("Wemb", {v, d});
    m.parameters.emplace_back("source_embedding.weight", embedding);
    m.parameters.emplace_back("target_embedding.weight", embedding);
    m.parameters.emplace_back("output_projection.weight",
                              transposed(a.take("decoder_ff_logit_out_W", {d, v})));
  } else {
    m.parameters.emplace_back("source_embedding.weight", a.take("encoder_Wemb", {v, d}));
    m.parameters.emplace_back("target_embedding.weight", a.take("decoder_Wemb", {v, d}));
    tie = "decoder";
    if (a.has("decoder_ff_logit_out_W")) {
      tie = "none";
      m.parameters.emplace_back("output_projection.weight",
                                transposed(a.take("decoder_ff_logit_out_W", {d, v})));
    }
  }
  m.parameters.emplace_back("output_projection.bias", a.take("decoder_ff_logit_out_b", {v}));
  return tie;
}

fs::path only_file(const fs::path& dir, const std::string& what,
                   const std::function<bool(const std::string&)>& matches) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (matches(entry.path().filename().string())) found.push_back(entry.path());
  TFM_CHECK(found.size() == 1, "{}: {} {} (give a directory with decoder.yml, or exactly one)",
            dir.string(), found.empty() ? "holds no" : "holds more than one", what);
  return found.front();
}

}  // namespace

std::vector<std::string> read_marian_vocab(const fs::path& path) {
  std::ifstream in(path);
  TFM_CHECK(in.good(), "{}: cannot be read (missing?)", path.string());
  std::map<int64_t, std::string> by_id;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t colon = line.rfind(':');
    std::string piece = line.substr(0, colon == std::string::npos ? 0 : colon);
    int64_t id = -1;
    try {
      id = std::stoll(line.substr(colon + 1));
    } catch (const std::exception&) {
    }
    TFM_CHECK(colon != std::string::npos && id >= 0, "{}:{}: not a 'piece: id' line: {}",
              path.string(), number, one_line(line));
    // YAML's quoting (as CTranslate2's _load_vocab undoes it): "..." with backslash escapes,
    // '...' with '' for a quote.
    if (piece.size() >= 2 && piece.front() == '"' && piece.back() == '"') {
      std::string plain;
      for (size_t i = 1; i + 1 < piece.size(); ++i)
        plain += piece[i] == '\\' && i + 2 < piece.size() ? piece[++i] : piece[i];
      piece = plain;
    } else if (piece.size() >= 2 && piece.front() == '\'' && piece.back() == '\'') {
      std::string plain;
      for (size_t i = 1; i + 1 < piece.size(); ++i) {
        plain += piece[i];
        if (piece[i] == '\'' && piece[i + 1] == '\'') ++i;
      }
      piece = plain;
    }
    TFM_CHECK(by_id.emplace(id, piece).second, "{}:{}: id {} given twice", path.string(), number,
              id);
  }
  std::vector<std::string> pieces;
  for (const auto& [id, piece] : by_id) {
    TFM_CHECK(id == static_cast<int64_t>(pieces.size()), "{}: id {} is missing (ids must be 0..{})",
              path.string(), pieces.size(), by_id.size() - 1);
    pieces.push_back(piece);
  }
  return pieces;
}

ImportedModel import_marian(const fs::path& source) {
  TFM_CHECK(fs::is_directory(source), "{}: not a directory (give the model's folder)",
            source.string());
  fs::path npz, vocab;
  if (fs::exists(source / "decoder.yml")) {
    const std::string where = (source / "decoder.yml").string();
    YAML::Node yml;
    try {
      yml = YAML::LoadFile(where);
      npz = source / yml["models"][0].as<std::string>();
      vocab = source / yml["vocabs"][0].as<std::string>();
      TFM_CHECK(yml["vocabs"].size() == 2 &&
                    yml["vocabs"][1].as<std::string>() == yml["vocabs"][0].as<std::string>(),
                "{}: separate source and target vocabularies are not supported", where);
    } catch (const YAML::Exception& e) {
      fail("{}: needs models: and vocabs: lists: {}", where, one_line(e.what()));
    }
  } else {
    npz = only_file(source, ".npz model", [](const std::string& n) { return n.ends_with(".npz"); });
    vocab = only_file(source, "vocabulary .yml", [](const std::string& n) {
      return n.ends_with(".yml") && n.find("vocab") != std::string::npos;
    });
  }
  Arrays arrays(npz);
  const MarianOptions options = read_options(arrays.take_text("special:model.yml"), npz.string());
  ImportedModel m;
  m.pieces = read_marian_vocab(vocab);
  TFM_CHECK(static_cast<int64_t>(m.pieces.size()) == options.vocab,
            "{}: {} pieces, but the model's dim-vocabs is {}", vocab.string(), m.pieces.size(),
            options.vocab);
  TFM_CHECK(m.pieces.size() >= 2 && m.pieces[0] == "</s>" && m.pieces[1] == "<unk>",
            "{}: ids 0 and 1 must be </s> and <unk> (Marian's)", vocab.string());
  m.parameters.reserve(8 * static_cast<size_t>(options.layers + options.decoder_layers) + 8);
  const std::string tie = take_embeddings(arrays, options, m);
  // Learned positions (--transformer-train-position-embeddings): one table, Wpos, for both stacks.
  const bool learned = arrays.has("Wpos");
  int64_t positions = 1024;
  if (learned) {
    positions = arrays.rows("Wpos");
    const Tensor table = arrays.take("Wpos", {positions, options.d_model});
    m.parameters.emplace_back("encoder.positions.weight", table);
    m.parameters.emplace_back("decoder.positions.weight", table);
  }
  take_layers(arrays, options, m);
  arrays.check_all_used();
  m.config = {{"layers", options.layers},
              {"d_model", options.d_model},
              {"d_ff", options.d_ff},
              {"heads", options.heads},
              {"d_k", options.d_model / options.heads},
              {"d_v", options.d_model / options.heads},
              {"positional", learned ? "learned" : "sinusoidal"},
              {"max_positions", positions},
              {"vocab_size", options.vocab},
              {"norm", options.pre_norm ? "pre" : "post"},
              {"attention_bias", true},
              {"layer_norm_eps", 1e-6},  // transformer.h's layerNorm
              {"unk_id", 1},
              {"eos_id", 0},
              {"activation", options.activation},
              {"tie_embeddings", tie},
              {"output_bias", true},
              {"scale_embeddings", true},
              {"sinusoid", "halves_t2t"}};  // node_initializers.cpp's sinusoidalPositionEmbeddings
  if (options.decoder_layers != options.layers) m.config["decoder_layers"] = options.decoder_layers;
  // Marian starts the decoder from a zero embedding: a zero <pad> row as the first input, as
  // Hugging Face's converter appends it. tfm's configuration also needs a <s> apart from <pad>
  // (another zero row); neither is ever an output.
  m.config["pad_id"] = append_token(m, "<pad>");
  m.config["decoder_start_id"] = m.config["pad_id"];
  m.config["bos_id"] = append_token(m, "<s>");
  m.source_spm = read_bytes(source / "source.spm");
  m.target_spm = read_bytes(source / "target.spm");
  return m;
}

}  // namespace tfm::internal::convert
