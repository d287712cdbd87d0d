#include "tfm/convert/ctranslate2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tfm/core/error.h"
#include "tfm/data/vocab.h"
#include "tfm/io/atomic_file.h"
#include "tfm/model/model_dir.h"

namespace tfm::internal::convert {

namespace fs = std::filesystem;

namespace {

// A variable of model.bin: its shape, CTranslate2's DataType (float32 0, int8 1, int16 2) and
// bytes.
struct Variable {
  std::vector<uint32_t> shape;
  uint8_t dtype = 0;
  std::string bytes;
};

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class Variables {
 public:
  explicit Variables(bool int8) : int8_(int8) {}

  void scalar_int8(const std::string& name, int8_t value) {
    items_[name] = {{}, 1, std::string(1, static_cast<char>(value))};
  }
  void scalar_int16(const std::string& name, int16_t value) {
    items_[name] = {{}, 2, raw(std::vector<int16_t>{value})};
  }
  void plain(const std::string& name, const std::vector<float>& values,
             std::vector<uint32_t> shape) {
    items_[name] = {std::move(shape), 0, raw(values)};
  }
  // A [rows, cols] weight, int8 per row when asked (bench/ct2_convert.py's arithmetic, in f32).
  void weight(const std::string& name, const std::vector<float>& w, uint32_t rows) {
    const uint32_t cols = static_cast<uint32_t>(w.size() / rows);
    if (!int8_) return plain(name, w, {rows, cols});
    std::vector<int8_t> q(w.size());
    std::vector<float> scales(rows);
    for (uint32_t r = 0; r < rows; ++r) {
      float amax = 0;
      for (uint32_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(w[r * cols + c]));
      const float scale = 127.0f / (amax == 0 ? 127.0f : amax);
      for (uint32_t c = 0; c < cols; ++c)
        q[r * cols + c] = static_cast<int8_t>(std::nearbyint(w[r * cols + c] * scale));
      scales[r] = scale;
    }
    items_[name] = {{rows, cols}, 1, raw(q)};
    items_[name + "_scale"] = {{rows}, 0, raw(scales)};
  }

  // Binary version 6: the spec's name and revision, then the variables sorted by name, then no
  // aliases (CTranslate2's ModelSpec.save).
  std::string serialize() const {
    std::string out;
    auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
    auto text = [&](const std::string& s) {
      const uint16_t n = static_cast<uint16_t>(s.size() + 1);
      out.append(reinterpret_cast<const char*>(&n), 2);
      out += s;
      out += '\0';
    };
    u32(6);
    text("TransformerSpec");
    u32(5);
    u32(static_cast<uint32_t>(items_.size()));
    for (const auto& [name, v] : items_) {
      text(name);
      out += static_cast<char>(v.shape.size());
      for (uint32_t d : v.shape) u32(d);
      out += static_cast<char>(v.dtype);
      u32(static_cast<uint32_t>(v.bytes.size()));
      out += v.bytes;
    }
    u32(0);
    return out;
  }

 private:
  bool int8_;
  std::map<std::string, Variable> items_;
};

// The position table CTranslate2 adds to the scaled embeddings: row p is tfm's position p (the
// learned table's row p + position_offset, or the sinusoid of the configured layout).
std::vector<float> position_table(const LoadedModel& m, const std::string& side, int64_t rows) {
  const ModelConfig& c = m.config;
  const int64_t d = c.d_model;
  std::vector<float> table(static_cast<size_t>(rows * d));
  if (c.learned_positions()) {
    const float* learned = m.parameter(side + ".positions.weight").data<float>();
    std::memcpy(table.data(), learned + c.position_offset * d, table.size() * sizeof(float));
    return table;
  }
  const int64_t half = d / 2;
  for (int64_t p = 0; p < rows; ++p) {
    const double pos = static_cast<double>(p + c.position_offset);
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          c.sinusoid == "halves_t2t"
              ? pos * std::exp(-static_cast<double>(i) * std::log(10000.0) /
                               static_cast<double>(half - 1))
              : pos / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(d));
      const bool interleaved = c.sinusoid == "interleaved";
      table[static_cast<size_t>(p * d + (interleaved ? 2 * i : i))] =
          static_cast<float>(std::sin(angle));
      table[static_cast<size_t>(p * d + (interleaved ? 2 * i + 1 : half + i))] =
          static_cast<float>(std::cos(angle));
    }
  }
  return table;
}

std::vector<float> values(const LoadedModel& m, const std::string& name) {
  return m.parameter(name).to_floats();
}

void layer_norm(Variables& v, const LoadedModel& m, const std::string& scope,
                const std::string& name) {
  const auto d = static_cast<uint32_t>(m.config.d_model);
  v.plain(scope + "/gamma", values(m, name + ".weight"), {d});
  v.plain(scope + "/beta", values(m, name + ".bias"), {d});
}

// One CTranslate2 linear layer from tfm's, fused along the output rows when several (q, k, v).
void linear(Variables& v, const LoadedModel& m, const std::string& scope,
            const std::vector<std::string>& names) {
  std::vector<float> w, b;
  uint32_t rows = 0;
  for (const std::string& name : names) {
    const Tensor& weight = m.parameter(name + ".weight");
    const std::vector<float> part = weight.to_floats();
    w.insert(w.end(), part.begin(), part.end());
    rows += static_cast<uint32_t>(weight.shape()[0]);
    if (m.config.attention_bias || name.find("_proj") == std::string::npos) {
      const std::vector<float> bias = values(m, name + ".bias");
      b.insert(b.end(), bias.begin(), bias.end());
    }
  }
  v.weight(scope + "/weight", w, rows);
  if (!b.empty()) v.plain(scope + "/bias", b, {rows});
}

void attention(Variables& v, const LoadedModel& m, const std::string& scope,
               const std::string& name, bool self) {
  if (self) {
    linear(v, m, scope + "/linear_0", {name + ".q_proj", name + ".k_proj", name + ".v_proj"});
    linear(v, m, scope + "/linear_1", {name + ".out_proj"});
  } else {
    linear(v, m, scope + "/linear_0", {name + ".q_proj"});
    linear(v, m, scope + "/linear_1", {name + ".k_proj", name + ".v_proj"});
    linear(v, m, scope + "/linear_2", {name + ".out_proj"});
  }
}

// CTranslate2 counts each stack's layers from the variables it finds (layer_0, layer_1, ...), so
// the decoder may have another depth than the encoder.
void layers(Variables& v, const LoadedModel& m) {
  const int64_t encoder = m.config.layers, decoder = m.config.decoder_depth();
  for (int64_t i = 0; i < std::max(encoder, decoder); ++i) {
    for (const std::string side : {"encoder", "decoder"}) {
      if (i >= (side == "encoder" ? encoder : decoder)) continue;
      const std::string ct2 = fmt::format("{}/layer_{}", side, i);
      const std::string tfm = fmt::format("{}.layers.{}", side, i);
      layer_norm(v, m, ct2 + "/self_attention/layer_norm", tfm + ".self_attn_norm");
      attention(v, m, ct2 + "/self_attention", tfm + ".self_attn", true);
      if (side == "decoder") {
        layer_norm(v, m, ct2 + "/attention/layer_norm", tfm + ".cross_attn_norm");
        attention(v, m, ct2 + "/attention", tfm + ".cross_attn", false);
      }
      layer_norm(v, m, ct2 + "/ffn/layer_norm", tfm + ".ffn_norm");
      linear(v, m, ct2 + "/ffn/linear_0", {tfm + ".ffn.fc1"});
      linear(v, m, ct2 + "/ffn/linear_1", {tfm + ".ffn.fc2"});
    }
  }
}

int8_t activation_id(const std::string& activation) {
  if (activation == "gelu") return 3;   // Activation.GELU (erf form)
  if (activation == "swish") return 2;  // Activation.SWISH
  return 0;                             // Activation.RELU
}

// The pieces in id order: vocab.json's table (an imported model) or vocab.model's.
std::vector<std::string> model_pieces(const fs::path& dir, bool& source_eos) {
  source_eos = false;
  if (fs::exists(dir / kVocabTableFileName)) {
    std::ifstream in(dir / kVocabTableFileName);
    const nlohmann::json table = nlohmann::json::parse(in, nullptr, false);
    TFM_CHECK(table.is_object() && table.contains("pieces"), "{}: not a tfm id table",
              (dir / kVocabTableFileName).string());
    source_eos = table.value("source_eos", false);
    return table["pieces"].get<std::vector<std::string>>();
  }
  TFM_CHECK(fs::exists(dir / kVocabFileName), "{}: missing; the export needs the vocabulary",
            (dir / kVocabFileName).string());
  const data::Vocabulary vocab(dir / kVocabFileName);
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < vocab.size(); ++id) pieces.push_back(vocab.piece(id));
  return pieces;
}

}  // namespace

void export_ctranslate2(const fs::path& model_dir, const fs::path& out, bool int8) {
  const LoadedModel m = load_model_dir(model_dir);
  const ModelConfig& c = m.config;
  const std::string config_file = (model_dir / kConfigFileName).string();
  TFM_CHECK(c.task == "translation", "{}: task '{}': only translation models export", config_file,
            c.task);
  TFM_CHECK(c.d_k * c.heads == c.d_model && c.d_v * c.heads == c.d_model,
            "{}: d_k and d_v must be d_model / heads for CTranslate2", config_file);
  bool source_eos = false;
  const std::vector<std::string> pieces = model_pieces(model_dir, source_eos);
  TFM_CHECK(static_cast<int64_t>(pieces.size()) == c.vocab_size,
            "{}: {} pieces for a vocab_size of {}", model_dir.string(), pieces.size(),
            c.vocab_size);

  Variables v(int8);
  const int64_t rows = c.max_positions - c.position_offset;
  const auto d = static_cast<uint32_t>(c.d_model);
  for (const std::string side : {"encoder", "decoder"}) {
    v.scalar_int8(side + "/activation", activation_id(c.activation));
    v.scalar_int16(side + "/num_heads", static_cast<int16_t>(c.heads));
    v.scalar_int8(side + "/pre_norm", c.pre_norm() ? 1 : 0);
    v.scalar_int8(side + "/scale_embeddings", c.scale_embeddings ? 1 : 0);
    v.plain(side + "/position_encodings/encodings", position_table(m, side, rows),
            {static_cast<uint32_t>(rows), d});
    if (c.pre_norm()) layer_norm(v, m, side + "/layer_norm", side + ".final_norm");
  }
  v.scalar_int8("encoder/embeddings_merge", 0);
  const auto vocab = static_cast<uint32_t>(c.vocab_size);
  const std::string source = c.tie_embeddings == "all" ? "embedding" : "source_embedding";
  const std::string target = c.tie_embeddings == "all" ? "embedding" : "target_embedding";
  const std::string output = c.tie_embeddings == "none" ? "output_projection" : target;
  v.weight("encoder/embeddings_0/weight", values(m, source + ".weight"), vocab);
  v.weight("decoder/embeddings/weight", values(m, target + ".weight"), vocab);
  v.weight("decoder/projection/weight", values(m, output + ".weight"), vocab);
  if (c.output_bias)
    v.plain("decoder/projection/bias", values(m, "output_projection.bias"), {vocab});
  v.scalar_int16("decoder/alignment_layer", -1);
  v.scalar_int16("decoder/alignment_heads", 1);
  layers(v, m);

  std::error_code ec;
  fs::create_directories(out, ec);
  TFM_CHECK(!ec, "cannot create '{}': {}", out.string(), ec.message());
  write_file_atomically(out / "model.bin", v.serialize());
  auto piece = [&](int32_t id) { return pieces[static_cast<size_t>(id)]; };
  const nlohmann::ordered_json config = {{"add_source_bos", false},
                                         {"add_source_eos", source_eos},
                                         {"bos_token", piece(c.bos_id)},
                                         {"decoder_start_token", piece(c.decoder_start())},
                                         {"eos_token", piece(c.eos_id)},
                                         {"unk_token", piece(c.unk_id)},
                                         {"layer_norm_epsilon", c.layer_norm_eps},
                                         {"multi_query_attention", false}};
  write_file_atomically(out / "config.json", config.dump(2) + "\n");
  write_file_atomically(out / "shared_vocabulary.json", nlohmann::json(pieces).dump() + "\n");
}

}  // namespace tfm::internal::convert
