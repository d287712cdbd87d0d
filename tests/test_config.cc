// ModelConfig presets, JSON and validation; parameter specs and counts; forward FLOPs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "temp_dir.h"
#include "tfm/model/config.h"
#include "tfm/model/parameters.h"

namespace tfm::internal {
namespace {

using testing::expect_error;
using testing::TempDir;

// The parameter count in closed form, written independently of parameter_specs.
int64_t closed_form_count(const ModelConfig& c) {
  const int64_t d = c.d_model, qk = c.heads * c.d_k, v = c.heads * c.d_v;
  const int64_t attention =
      2 * qk * d + 2 * v * d + (c.attention_bias ? 2 * qk + v + d : 0);  // Wq, Wk, Wv, Wo
  const int64_t ffn = 2 * d * c.d_ff + c.d_ff + d;
  const int64_t norm = 2 * d;
  const int64_t encoder_layer = attention + norm + ffn + norm;
  const int64_t decoder_layer = 2 * attention + 3 * norm + ffn;
  return c.vocab_size * d + (c.learned_positions() ? 2 * c.max_positions * d : 0) +
         c.layers * (encoder_layer + decoder_layer) + (c.pre_norm() ? 2 * norm : 0);
}

// Table 3, copied from the paper (unlisted = base).
struct Row {
  const char* name;
  int64_t N, d_model, d_ff, h, d_k, d_v;
  double p_drop, eps_ls;
  bool learned;
};
const Row kTable3[] = {
    {"base", 6, 512, 2048, 8, 64, 64, 0.1, 0.1, false},
    {"A1", 6, 512, 2048, 1, 512, 512, 0.1, 0.1, false},
    {"A2", 6, 512, 2048, 4, 128, 128, 0.1, 0.1, false},
    {"A3", 6, 512, 2048, 16, 32, 32, 0.1, 0.1, false},
    {"A4", 6, 512, 2048, 32, 16, 16, 0.1, 0.1, false},
    {"B1", 6, 512, 2048, 8, 16, 64, 0.1, 0.1, false},
    {"B2", 6, 512, 2048, 8, 32, 64, 0.1, 0.1, false},
    {"C1", 2, 512, 2048, 8, 64, 64, 0.1, 0.1, false},
    {"C2", 4, 512, 2048, 8, 64, 64, 0.1, 0.1, false},
    {"C3", 8, 512, 2048, 8, 64, 64, 0.1, 0.1, false},
    {"C4", 6, 256, 2048, 8, 32, 32, 0.1, 0.1, false},
    {"C5", 6, 1024, 2048, 8, 128, 128, 0.1, 0.1, false},
    {"C6", 6, 512, 1024, 8, 64, 64, 0.1, 0.1, false},
    {"C7", 6, 512, 4096, 8, 64, 64, 0.1, 0.1, false},
    {"D1", 6, 512, 2048, 8, 64, 64, 0.0, 0.1, false},
    {"D2", 6, 512, 2048, 8, 64, 64, 0.2, 0.1, false},
    {"D3", 6, 512, 2048, 8, 64, 64, 0.1, 0.0, false},
    {"D4", 6, 512, 2048, 8, 64, 64, 0.1, 0.2, false},
    {"E", 6, 512, 2048, 8, 64, 64, 0.1, 0.1, true},
    {"big", 6, 1024, 4096, 16, 64, 64, 0.3, 0.1, false},
};

TEST(ModelConfig, DefaultsAreBase) {
  ModelConfig c;
  EXPECT_EQ(c, preset("base"));
  EXPECT_EQ(c.vocab_size, 37000);
  EXPECT_EQ(c.positional, "sinusoidal");
  EXPECT_EQ(c.norm, "post");
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.max_positions, 1024);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.attention_dropout, 0.0);
  EXPECT_EQ(c.pad_id, 0);
  EXPECT_EQ(c.unk_id, 1);
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_EQ(c.eos_id, 3);
}

TEST(ModelConfig, PresetsMatchTable3AndClosedFormCounts) {
  ASSERT_EQ(preset_names().size(), std::size(kTable3));
  for (const Row& row : kTable3) {
    SCOPED_TRACE(row.name);
    const ModelConfig c = preset(row.name);
    EXPECT_EQ(c.layers, row.N);
    EXPECT_EQ(c.d_model, row.d_model);
    EXPECT_EQ(c.d_ff, row.d_ff);
    EXPECT_EQ(c.heads, row.h);
    EXPECT_EQ(c.d_k, row.d_k);
    EXPECT_EQ(c.d_v, row.d_v);
    EXPECT_DOUBLE_EQ(c.dropout, row.p_drop);
    EXPECT_DOUBLE_EQ(c.label_smoothing, row.eps_ls);
    EXPECT_EQ(c.learned_positions(), row.learned);
    EXPECT_EQ(c.vocab_size, 37000);
    EXPECT_EQ(parameter_count(c), closed_form_count(c));
    ModelConfig variant = c;
    variant.attention_bias = true;
    variant.norm = "pre";
    variant.vocab_size = 32000;
    EXPECT_EQ(parameter_count(variant), closed_form_count(variant));
    EXPECT_EQ(parameter_breakdown(c).total(), parameter_count(c));
  }
}

TEST(ModelConfig, CountsOfTheSpec) {
  EXPECT_EQ(parameter_count(preset("base")), 63'045'632);
  EXPECT_EQ(parameter_count(preset("big")), 214'171'648);
  ModelConfig base = preset("base"), big = preset("big");
  base.attention_bias = big.attention_bias = true;
  EXPECT_EQ(parameter_count(base), 63'082'496);
  EXPECT_EQ(parameter_count(big), 214'245'376);
  const ParameterBreakdown parts = parameter_breakdown(preset("E"));
  EXPECT_EQ(parts.embedding, 37000 * 512);
  EXPECT_EQ(parts.positions, 2 * 1024 * 512);
  // A deep encoder over a shallow decoder: base's 6 encoder layers (3,150,336 parameters each) and
  // 2 decoder layers (4,199,936 each, with the cross-attention and its norm).
  ModelConfig shallow = preset("base");
  shallow.decoder_layers = 2;
  const ParameterBreakdown six_two = parameter_breakdown(shallow);
  EXPECT_EQ(six_two.encoder, 6 * 3'150'336);
  EXPECT_EQ(six_two.decoder, 2 * 4'199'936);
  EXPECT_EQ(parameter_count(shallow), 46'245'888);
}

TEST(ModelConfig, PaperParamsColumn) {
  EXPECT_EQ(paper_params_millions("base"), 65);
  EXPECT_EQ(paper_params_millions("big"), 213);
  EXPECT_EQ(paper_params_millions("C5"), 168);
  EXPECT_FALSE(paper_params_millions("A1").has_value());
  expect_error([] { paper_params_millions("Z"); }, {"unknown preset 'Z'"});
}

// Presets are not validated when taken (config.h: a configuration is validated where it enters):
// every one must be valid as written.
TEST(ModelConfig, EveryPresetIsValid) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(validate(preset(name)));
  }
}

TEST(ModelConfig, UnknownPresetListsValidNames) {
  expect_error([] { preset("huge"); }, {"unknown preset 'huge'", "base", "A1", "C7", "E", "big"});
  expect_error([] { preset("Base"); }, {"unknown preset 'Base'"});
}

TEST(ParameterSpecs, OrderAndNamesOfASmallModel) {
  ModelConfig c;
  c.layers = 1, c.d_model = 6, c.d_ff = 10, c.heads = 2, c.d_k = 4, c.d_v = 5, c.vocab_size = 11;
  c.max_positions = 7, c.positional = "learned", c.norm = "pre", c.attention_bias = true;
  std::vector<std::string> expected = {"embedding.weight", "encoder.positions.weight"};
  auto attention = [&](const std::string& p) {
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      expected.push_back(p + proj + ".weight");
      expected.push_back(p + proj + ".bias");
    }
  };
  auto norm = [&](const std::string& p) {
    expected.push_back(p + ".weight");
    expected.push_back(p + ".bias");
  };
  auto ffn = [&](const std::string& p) {
    for (const char* n : {"ffn.fc1.weight", "ffn.fc1.bias", "ffn.fc2.weight", "ffn.fc2.bias"})
      expected.push_back(p + n);
  };
  attention("encoder.layers.0.self_attn.");
  norm("encoder.layers.0.self_attn_norm");
  ffn("encoder.layers.0.");
  norm("encoder.layers.0.ffn_norm");
  norm("encoder.final_norm");
  expected.push_back("decoder.positions.weight");
  attention("decoder.layers.0.self_attn.");
  norm("decoder.layers.0.self_attn_norm");
  attention("decoder.layers.0.cross_attn.");
  norm("decoder.layers.0.cross_attn_norm");
  ffn("decoder.layers.0.");
  norm("decoder.layers.0.ffn_norm");
  norm("decoder.final_norm");

  const std::vector<ParameterSpec> specs = parameter_specs(c);
  std::vector<std::string> names;
  for (const ParameterSpec& s : specs) names.push_back(s.name);
  EXPECT_EQ(names, expected);

  std::map<std::string, Shape> shapes;
  for (const ParameterSpec& s : specs) shapes[s.name] = s.shape;
  EXPECT_EQ(shapes["embedding.weight"], (Shape{11, 6}));
  EXPECT_EQ(shapes["decoder.positions.weight"], (Shape{7, 6}));
  EXPECT_EQ(shapes["encoder.layers.0.self_attn.q_proj.weight"], (Shape{8, 6}));
  EXPECT_EQ(shapes["encoder.layers.0.self_attn.k_proj.bias"], (Shape{8}));
  EXPECT_EQ(shapes["decoder.layers.0.cross_attn.v_proj.weight"], (Shape{10, 6}));
  EXPECT_EQ(shapes["decoder.layers.0.cross_attn.out_proj.weight"], (Shape{6, 10}));
  EXPECT_EQ(shapes["decoder.layers.0.cross_attn.out_proj.bias"], (Shape{6}));
  EXPECT_EQ(shapes["encoder.layers.0.ffn.fc1.weight"], (Shape{10, 6}));
  EXPECT_EQ(shapes["encoder.layers.0.ffn.fc2.weight"], (Shape{6, 10}));
  EXPECT_EQ(shapes["decoder.final_norm.bias"], (Shape{6}));
}

TEST(ParameterSpecs, BaseHasNoOptionalTensorsAndUniqueNames) {
  const std::vector<ParameterSpec> specs = parameter_specs(preset("base"));
  std::set<std::string> names;
  for (const ParameterSpec& s : specs) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_EQ(s.name.find("positions"), std::string::npos);
    EXPECT_EQ(s.name.find("final_norm"), std::string::npos);
    EXPECT_FALSE(s.name.ends_with("_proj.bias")) << s.name;
  }
  // Per layer: encoder 4 + 2 + 4 + 2, decoder 4 + 2 + 4 + 2 + 4 + 2; plus the embedding.
  EXPECT_EQ(specs.size(), 1u + 6 * 12 + 6 * 18);
  EXPECT_EQ(specs.back().name, "decoder.layers.5.ffn_norm.bias");
}

// tie_embeddings and output_bias name the vocabulary matrices first, in this order, and add their
// size to the count: V*d per extra matrix, V for the bias.
TEST(ParameterSpecs, VocabularyMatricesOfTheTieVariants) {
  const ModelConfig base = preset("base");
  const int64_t vd = base.vocab_size * base.d_model;
  const std::vector<std::pair<ModelConfig, std::vector<std::string>>> cases = [&] {
    ModelConfig all_bias = base, decoder = base, none_bias = base;
    all_bias.output_bias = true;
    decoder.tie_embeddings = "decoder";
    none_bias.tie_embeddings = "none", none_bias.output_bias = true;
    return std::vector<std::pair<ModelConfig, std::vector<std::string>>>{
        {all_bias, {"embedding.weight", "output_projection.bias"}},
        {decoder, {"source_embedding.weight", "target_embedding.weight"}},
        {none_bias,
         {"source_embedding.weight", "target_embedding.weight", "output_projection.weight",
          "output_projection.bias"}}};
  }();
  for (const auto& [config, names] : cases) {
    SCOPED_TRACE(config.tie_embeddings);
    validate(config);
    const std::vector<ParameterSpec> specs = parameter_specs(config);
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(specs[i].name, names[i]);
      const Shape expected = names[i].ends_with(".bias") ? Shape{base.vocab_size}
                                                         : Shape{base.vocab_size, base.d_model};
      EXPECT_EQ(specs[i].shape, expected);
    }
    EXPECT_TRUE(specs[names.size()].name.starts_with("encoder.")) << specs[names.size()].name;
    const int64_t extra = (config.tie_embeddings == "decoder" ? vd
                           : config.tie_embeddings == "none"  ? 2 * vd
                                                              : 0) +
                          (config.output_bias ? base.vocab_size : 0);
    EXPECT_EQ(parameter_count(config), parameter_count(base) + extra);
    EXPECT_EQ(parameter_breakdown(config).embedding, vd + extra);
  }
  // The other variant keys add no parameter.
  ModelConfig other = base;
  other.activation = "gelu", other.scale_embeddings = false, other.sinusoid = "halves";
  other.position_offset = 2, other.decoder_start_id = 0;
  EXPECT_EQ(parameter_count(other), parameter_count(base));
}

// The FLOPs as a list of matrix products (M x K) @ (K x N), each 2*M*K*N.
double matmul_flops(const ModelConfig& c, double S, double T) {
  const double d = c.d_model, hk = c.heads * c.d_k, hv = c.heads * c.d_v, h = c.heads;
  double total = 0;
  auto mm = [&total](double m, double k, double n) { total += 2 * m * k * n; };
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    mm(S, d, hk), mm(S, d, hk), mm(S, d, hv);                // encoder Q, K, V
    mm(h * S, c.d_k, S), mm(h * S, S, c.d_v), mm(S, hv, d);  // scores, sum, Wo
    mm(S, d, c.d_ff), mm(S, c.d_ff, d);                      // FFN
  }
  for (int64_t layer = 0; layer < c.decoder_depth(); ++layer) {
    mm(T, d, hk), mm(T, d, hk), mm(T, d, hv);                // decoder self Q, K, V
    mm(h * T, c.d_k, T), mm(h * T, T, c.d_v), mm(T, hv, d);  // full T x T
    mm(T, d, hk), mm(S, d, hk), mm(S, d, hv);                // cross Q; K, V of source
    mm(h * T, c.d_k, S), mm(h * T, S, c.d_v), mm(T, hv, d);  // cross scores, sum, Wo
    mm(T, d, c.d_ff), mm(T, c.d_ff, d);                      // FFN
  }
  mm(T, d, static_cast<double>(c.vocab_size));  // logits
  return total;
}

TEST(ForwardFlops, MatchesTheListOfMatrixProducts) {
  std::vector<std::pair<std::string, ModelConfig>> configs;
  for (const char* name : {"base", "A1", "B1", "C4", "big"})
    configs.emplace_back(name, preset(name));
  for (const auto& [encoder, decoder] : {std::pair{6, 2}, std::pair{2, 6}}) {
    ModelConfig c = preset("base");
    c.layers = encoder, c.decoder_layers = decoder;
    configs.emplace_back(fmt::format("base {}+{}", encoder, decoder), c);
  }
  for (const auto& [name, c] : configs) {
    SCOPED_TRACE(name);
    const ForwardFlops f = forward_flops(c, 17, 23);
    EXPECT_DOUBLE_EQ(f.per_pair(), matmul_flops(c, 17, 23));
    EXPECT_DOUBLE_EQ(f.per_token(), f.per_pair() / 40);
    EXPECT_DOUBLE_EQ(forward_flops_per_token(c, 17, 23), f.per_token());
    EXPECT_DOUBLE_EQ(f.output, 2.0 * 23 * c.d_model * c.vocab_size);
    EXPECT_DOUBLE_EQ(f.per_source_token() * 17 + f.per_target_token() * 23, f.per_pair());
  }
  // Short sequences: about 2 FLOPs per parameter touched per token, a sanity bound.
  const ForwardFlops base = forward_flops(preset("base"), 1, 1);
  EXPECT_GT(base.per_pair(), 2.0 * (parameter_count(preset("base")) - 37000 * 512));
  expect_error([] { forward_flops(preset("base"), 0, 5); }, {"lengths must be positive"});
}

TEST(ModelConfig, JsonRoundTrip) {
  ModelConfig c = preset("C5");
  c.positional = "learned", c.d_model = 1023, c.norm = "pre", c.attention_bias = true;
  c.attention_dropout = 0.15, c.layer_norm_eps = 1e-6, c.vocab_size = 32123, c.max_positions = 300;
  c.pad_id = 7, c.unk_id = 0, c.bos_id = 32122, c.eos_id = 5, c.label_smoothing = 0.05;
  c.task = "parsing";
  EXPECT_EQ(config_from_json(config_to_json(c)), c);
  const nlohmann::json plain = nlohmann::json::parse(config_to_json(c).dump());
  EXPECT_EQ(config_from_json(plain), c);
  EXPECT_EQ(config_to_json(c).size(), 20u);
  EXPECT_EQ(config_to_json(c).begin().key(), "layers");
  // A lexicalised parser's tree_leaves is written (after task); the placeholder default is not.
  ModelConfig lexical = c;
  lexical.tree_leaves = "words";
  EXPECT_EQ(config_to_json(lexical).size(), 21u);
  EXPECT_EQ(config_to_json(lexical)["tree_leaves"], "words");
  EXPECT_EQ(config_from_json(config_to_json(lexical)), lexical);

  TempDir dir;
  save_config(dir / "config.json", c);
  EXPECT_EQ(load_config(dir / "config.json"), c);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(entry.path().filename(), "config.json");  // no temporary file left behind
}

// The variant keys (activation .. decoder_start_id) are written only when they differ from their
// defaults: a paper-architecture config.json is the file written before they existed.
TEST(ModelConfig, VariantKeysRoundTripAndAreLeftOutAtTheirDefaults) {
  const nlohmann::ordered_json plain = config_to_json(ModelConfig{});
  EXPECT_EQ(plain.size(), 20u);
  EXPECT_EQ(plain.dump(),
            R"({"layers":6,"d_model":512,"d_ff":2048,"heads":8,"d_k":64,"d_v":64,"dropout":0.1,)"
            R"("attention_dropout":0.0,"label_smoothing":0.1,"positional":"sinusoidal",)"
            R"("max_positions":1024,"vocab_size":37000,"norm":"post","attention_bias":false,)"
            R"("layer_norm_eps":1e-05,"pad_id":0,"unk_id":1,"bos_id":2,"eos_id":3,)"
            R"("task":"translation"})");
  EXPECT_EQ(config_keys().size(), 29u);
  EXPECT_EQ(config_keys().back(), "decoder_layers");

  ModelConfig c;
  c.activation = "swish", c.tie_embeddings = "none", c.output_bias = true;
  c.scale_embeddings = false, c.sinusoid = "halves_t2t", c.position_offset = 2;
  c.decoder_start_id = 0, c.decoder_layers = 2;
  const nlohmann::ordered_json written = config_to_json(c);
  EXPECT_EQ(written.size(), 28u);
  EXPECT_EQ(written["decoder_layers"], 2);
  EXPECT_EQ(config_from_json(written), c);
  ModelConfig one;
  one.activation = "gelu";
  EXPECT_EQ(config_to_json(one).size(), 21u);
  EXPECT_EQ(config_to_json(one)["activation"], "gelu");
  EXPECT_EQ(config_from_json(config_to_json(one)), one);
  // Given at their defaults, they read as absent.
  EXPECT_EQ(config_from_json(nlohmann::json{
                {"sinusoid", "interleaved"}, {"decoder_start_id", -1}, {"decoder_layers", -1}}),
            ModelConfig{});
  EXPECT_EQ(ModelConfig{}.decoder_start(), 2);
  EXPECT_EQ(ModelConfig{}.decoder_depth(), 6);
  EXPECT_EQ(c.decoder_depth(), 2);
  EXPECT_EQ(c.layers, 6);
  EXPECT_EQ(c.decoder_start(), 0);
  EXPECT_EQ(c.longest_sequence(), 1022);
  // fairseq's decoder starts from eos (its prev_output_tokens are </s> y1 .. yn).
  EXPECT_EQ(config_from_json(nlohmann::json{{"decoder_start_id", 3}}).decoder_start(), 3);

  TempDir dir;
  save_config(dir / "config.json", c);
  EXPECT_EQ(load_config(dir / "config.json"), c);
}

TEST(ModelConfig, PartialJsonOverridesDefaults) {
  const ModelConfig c = config_from_json(nlohmann::json{{"layers", 3}, {"vocab_size", 500}});
  EXPECT_EQ(c.tree_leaves, "xx");
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.vocab_size, 500);
  EXPECT_EQ(c.d_model, 512);
  const ModelConfig big_variant = config_from_json(nlohmann::json{{"dropout", 0.1}}, preset("big"));
  EXPECT_EQ(big_variant.d_model, 1024);
  EXPECT_DOUBLE_EQ(big_variant.dropout, 0.1);
}

TEST(ModelConfig, JsonValidationNamesTheKeyAndTheProblem) {
  using nlohmann::json;
  auto with = [](const char* key, json value) {
    json j = json::object();
    j[key] = std::move(value);
    return j;
  };
  const std::vector<std::pair<json, std::vector<std::string>>> cases = {
      {with("colour", "red"), {"unknown configuration key 'colour'", "d_model"}},
      {with("d_model", "512"), {"'d_model' must be an integer", "string"}},
      {with("layers", 6.5), {"'layers' must be an integer"}},
      {with("dropout", "high"), {"'dropout' must be a number"}},
      {with("attention_bias", 1), {"'attention_bias' must be true or false"}},
      {with("positional", 3), {"'positional' must be a string"}},
      {with("layers", 0), {"'layers' must be positive, got 0"}},
      // Found by the config_json fuzzer: 5,555,550 layers made a parameter list of gigabytes.
      {with("layers", 5555550), {"'layers' must be at most 1024, got 5555550"}},
      {with("layers", 1025), {"'layers' must be at most 1024"}},
      {with("d_ff", -5), {"'d_ff' must be positive, got -5"}},
      {with("heads", 0), {"'heads' must be positive"}},
      {with("vocab_size", int64_t{1} << 40), {"'vocab_size' must be at most"}},
      // Attention is quadratic in the length: a table of 2^24 positions made every load slow.
      {with("max_positions", int64_t{1} << 24),
       {"'max_positions' must be at most 65536", "16777216"}},
      {with("max_positions", 65537), {"'max_positions' must be at most 65536"}},
      {with("d_model", 511), {"'d_model' must be even with sinusoidal"}},
      {with("positional", "rotary"), {"'positional' must be", "\"rotary\""}},
      {with("norm", "middle"), {"'norm' must be \"post\" or \"pre\"", "middle"}},
      {with("task", "tagging"), {"'task' must be \"translation\" or \"parsing\"", "tagging"}},
      {with("tree_leaves", "XX"), {"'tree_leaves' must be one of \"xx\", \"words\"", "\"XX\""}},
      {with("tree_leaves", "words"),
       {"'tree_leaves' \"words\" needs task \"parsing\", got task \"translation\""}},
      {with("dropout", 1.0), {"'dropout' must be in [0, 1), got 1"}},
      {with("attention_dropout", -0.1), {"'attention_dropout' must be in [0, 1)"}},
      {with("label_smoothing", 1.5), {"'label_smoothing' must be in [0, 1)"}},
      {with("layer_norm_eps", 0), {"'layer_norm_eps' must be positive"}},
      {with("eos_id", 37000), {"'eos_id' must be a token id in [0, vocab_size)", "37000"}},
      {with("pad_id", -1), {"'pad_id' must be a non-negative token id"}},
      {with("bos_id", 3), {"'bos_id' and 'eos_id' must be different", "both are 3"}},
      {with("activation", "tanh"), {"'activation' must be one of \"relu\", \"gelu\"", "tanh"}},
      {with("activation", true), {"'activation' must be a string"}},
      {with("tie_embeddings", "encoder"), {"'tie_embeddings' must be one of", "\"encoder\""}},
      {with("output_bias", "yes"), {"'output_bias' must be true or false"}},
      {with("scale_embeddings", 1), {"'scale_embeddings' must be true or false"}},
      {with("sinusoid", "halfs"), {"'sinusoid' must be one of", "\"halves_t2t\"", "halfs"}},
      {json{{"sinusoid", "halves_t2t"}, {"d_model", 2}, {"heads", 1}},
       {"'sinusoid' \"halves_t2t\" needs d_model >= 4, got 2"}},
      {with("position_offset", -1), {"'position_offset' must be in [0, max_positions)"}},
      {with("position_offset", 1024), {"'position_offset' must be in [0, max_positions)", "1024"}},
      {with("decoder_start_id", -2), {"'decoder_start_id' must be a token id or -1", "-2"}},
      {with("decoder_start_id", 37000), {"'decoder_start_id' must be -1 (the bos_id) or a token"}},
      {with("decoder_layers", 0),
       {"'decoder_layers' must be -1 (as many as 'layers') or in [1,", "got 0"}},
      {with("decoder_layers", -2), {"'decoder_layers' must be -1", "got -2"}},
      {with("decoder_layers", 1025), {"'decoder_layers' must be -1", "1024], got 1025"}},
      {with("decoder_layers", 1.5), {"'decoder_layers' must be an integer"}},
      {json::array({1, 2}), {"must be a JSON object"}},
  };
  for (const auto& [input, parts] : cases) {
    SCOPED_TRACE(input.dump());
    try {
      config_from_json(input);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      for (const std::string& part : parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(config_from_json(json{{"max_positions", 65536}}).max_positions, 65536);
  // Odd d_model is fine with learned positions.
  EXPECT_EQ(config_from_json(json{{"d_model", 511}, {"positional", "learned"}}).d_model, 511);
  // A size that would be absurd in total.
  expect_error(
      [] {
        config_from_json(json{{"d_model", 1 << 22}, {"d_ff", 1 << 24}});
      },
      {"parameters, too many"});
}

TEST(ModelConfig, FileErrorsNameTheFile) {
  TempDir dir;
  const auto missing = dir / "nothing.json";
  expect_error([&] { load_config(missing); }, {missing.string(), "cannot open"});
  const auto broken = dir / "broken.json";
  std::ofstream(broken) << "{\"layers\": 6,";
  expect_error([&] { load_config(broken); }, {broken.string(), "not valid JSON"});
  const auto invalid = dir / "invalid.json";
  std::ofstream(invalid) << R"({"layers": 6, "norm": "sideways"})";
  expect_error([&] { load_config(invalid); }, {invalid.string(), "'norm'", "sideways"});
  // Numbers beyond double (nlohmann throws out_of_range) and integers beyond int64 (read as
  // doubles): tfm::internal::Errors naming the file and the problem.
  const auto overflow = dir / "overflow.json";
  std::ofstream(overflow) << R"({"layers": 6, "d_model": 1e400})";
  expect_error([&] { load_config(overflow); }, {overflow.string(), "not valid JSON", "1e400"});
  for (const char* huge : {"123456789012345678901234567890", "18446744073709551616",
                           "9223372036854775808", "-9223372036854775809"}) {
    const auto big = dir / "big.json";
    std::ofstream(big) << fmt::format(R"({{"layers": {}}})", huge);
    expect_error([&] { load_config(big); }, {big.string(), "'layers'"});
  }
  // A key given twice (JSON parsers keep the last one silently) is an error naming file and key;
  // so is an unknown key.
  const auto repeated = dir / "repeated.json";
  std::ofstream(repeated) << R"({"layers": 6, "d_model": 256, "layers": 2})";
  expect_error([&] { load_config(repeated); },
               {repeated.string(), "configuration key 'layers' given twice"});
  const auto unknown = dir / "unknown.json";
  std::ofstream(unknown) << R"({"layers": 6, "colour": "red"})";
  expect_error([&] { load_config(unknown); },
               {unknown.string(), "unknown configuration key 'colour'", "valid keys: layers"});
  ModelConfig bad;
  bad.heads = 0;
  expect_error([&] { save_config(dir / "bad.json", bad); }, {"bad.json", "'heads'"});
  EXPECT_FALSE(std::filesystem::exists(dir / "bad.json"));
  expect_error([&] { save_config(dir / "no" / "such" / "dir.json", ModelConfig{}); },
               {"dir.json", "cannot create"});
}

}  // namespace
}  // namespace tfm::internal
