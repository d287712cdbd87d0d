#include "tfm/model/parameters.h"

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {

void add_attention(std::vector<ParameterSpec>& specs, const std::string& prefix,
                   const ModelConfig& c) {
  const int64_t qk = c.heads * c.d_k;
  const int64_t v = c.heads * c.d_v;
  const std::pair<const char*, Shape> projections[] = {{"q_proj", Shape{qk, c.d_model}},
                                                       {"k_proj", Shape{qk, c.d_model}},
                                                       {"v_proj", Shape{v, c.d_model}},
                                                       {"out_proj", Shape{c.d_model, v}}};
  for (const auto& [name, shape] : projections) {
    specs.push_back({prefix + name + ".weight", shape});
    if (c.attention_bias) specs.push_back({prefix + name + ".bias", Shape{shape[0]}});
  }
}

void add_norm(std::vector<ParameterSpec>& specs, const std::string& prefix, const ModelConfig& c) {
  specs.push_back({prefix + ".weight", Shape{c.d_model}});
  specs.push_back({prefix + ".bias", Shape{c.d_model}});
}

void add_ffn(std::vector<ParameterSpec>& specs, const std::string& prefix, const ModelConfig& c) {
  specs.push_back({prefix + "ffn.fc1.weight", Shape{c.d_ff, c.d_model}});
  specs.push_back({prefix + "ffn.fc1.bias", Shape{c.d_ff}});
  specs.push_back({prefix + "ffn.fc2.weight", Shape{c.d_model, c.d_ff}});
  specs.push_back({prefix + "ffn.fc2.bias", Shape{c.d_model}});
}

void add_stack(std::vector<ParameterSpec>& specs, const std::string& side, const ModelConfig& c) {
  if (c.learned_positions())
    specs.push_back({side + ".positions.weight", Shape{c.max_positions, c.d_model}});
  const int64_t layers = side == "decoder" ? c.decoder_depth() : c.layers;
  for (int64_t i = 0; i < layers; ++i) {
    const std::string prefix = side + ".layers." + std::to_string(i) + ".";
    add_attention(specs, prefix + "self_attn.", c);
    add_norm(specs, prefix + "self_attn_norm", c);
    if (side == "decoder") {
      add_attention(specs, prefix + "cross_attn.", c);
      add_norm(specs, prefix + "cross_attn_norm", c);
    }
    add_ffn(specs, prefix, c);
    add_norm(specs, prefix + "ffn_norm", c);
  }
  if (c.pre_norm()) add_norm(specs, side + ".final_norm", c);
}

}  // namespace

VocabularyMatrices vocabulary_matrices(const ModelConfig& config) {
  if (config.tie_embeddings == "all")
    return {"embedding.weight", "embedding.weight", "embedding.weight"};
  if (config.tie_embeddings == "decoder")
    return {"source_embedding.weight", "target_embedding.weight", "target_embedding.weight"};
  return {"source_embedding.weight", "target_embedding.weight", "output_projection.weight"};
}

std::vector<std::string> vocabulary_matrix_names(const ModelConfig& config) {
  const VocabularyMatrices m = vocabulary_matrices(config);
  std::vector<std::string> names = {m.source};
  for (const std::string& name : {m.target, m.output})
    if (name != names.back()) names.push_back(name);
  return names;
}

std::vector<ParameterSpec> parameter_specs(const ModelConfig& config) {
  std::vector<ParameterSpec> specs;
  for (const std::string& name : vocabulary_matrix_names(config))
    specs.push_back({name, Shape{config.vocab_size, config.d_model}});
  if (config.output_bias) specs.push_back({"output_projection.bias", Shape{config.vocab_size}});
  add_stack(specs, "encoder", config);
  add_stack(specs, "decoder", config);
  return specs;
}

ParameterBreakdown parameter_breakdown(const ModelConfig& config) {
  ParameterBreakdown parts;
  for (const ParameterSpec& spec : parameter_specs(config)) {
    const int64_t n = spec.shape.numel();
    const std::string_view name = spec.name;
    if (!name.starts_with("encoder.") && !name.starts_with("decoder."))
      parts.embedding += n;
    else if (name.ends_with(".positions.weight"))
      parts.positions += n;
    else if (name.starts_with("encoder."))
      parts.encoder += n;
    else
      parts.decoder += n;
  }
  return parts;
}

int64_t parameter_count(const ModelConfig& config) {
  return parameter_breakdown(config).total();
}

ForwardFlops forward_flops(const ModelConfig& c, int64_t source_length, int64_t target_length) {
  TFM_CHECK(source_length > 0 && target_length > 0,
            "sequence lengths must be positive, got source {} and target {}", source_length,
            target_length);
  const double d = static_cast<double>(c.d_model);
  const double h = static_cast<double>(c.heads);
  const double dk = static_cast<double>(c.d_k);
  const double dv = static_cast<double>(c.d_v);
  const double ff = static_cast<double>(c.d_ff);
  const double S = static_cast<double>(source_length);
  const double T = static_cast<double>(target_length);
  const double encoder_layers = static_cast<double>(c.layers);
  const double decoder_layers = static_cast<double>(c.decoder_depth());

  // Attention of `queries` positions over `keys` positions, with all four projections.
  auto attention = [&](double queries, double keys) {
    return 2 * queries * d * h * dk              // Q
           + 2 * keys * d * h * (dk + dv)        // K, V
           + 2 * queries * keys * h * (dk + dv)  // scores and weighted sum
           + 2 * queries * h * dv * d;           // output projection
  };
  auto ffn = [&](double tokens) { return 4 * tokens * d * ff; };

  ForwardFlops flops;
  flops.source_length = source_length;
  flops.target_length = target_length;
  flops.encoder = encoder_layers * (attention(S, S) + ffn(S));
  flops.decoder = decoder_layers * (attention(T, T) + attention(T, S) + ffn(T));
  flops.output = 2 * T * d * static_cast<double>(c.vocab_size);
  return flops;
}

double forward_flops_per_token(const ModelConfig& config, int64_t source_length,
                               int64_t target_length) {
  return forward_flops(config, source_length, target_length).per_token();
}

}  // namespace tfm::internal
