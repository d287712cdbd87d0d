#include "tfm/nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "tfm/model/parameters.h"
#include "tfm/ops/ops.h"

namespace tfm::internal::nn {

ops::SumAndNorm normalize(const Residual& stream, const LayerNorm& norm) {
  if (!stream.branch.defined()) return {stream.x, norm.forward(stream.x)};
  return ops::add_dropout_then_layer_norm(stream.x, stream.branch, stream.p, stream.seed,
                                          norm.weight, norm.bias, norm.eps);
}

Tensor settle(const Residual& stream) {
  if (!stream.branch.defined()) return stream.x;
  return ops::add(
      stream.x, stream.p > 0 ? ops::dropout(stream.branch, stream.p, stream.seed) : stream.branch);
}

Tensor finish(const Residual& stream, const LayerNorm& final_norm) {
  if (!final_norm.weight.defined()) return settle(stream);
  return normalize(stream, final_norm).normed;
}

// The seed is drawn after the sub-layer ran, as the unfused composition draws it, so that every
// random op sees the same seed either way.
template <typename Sublayer>
Residual ResidualNorm::apply(const Residual& stream, ForwardContext& ctx,
                             Sublayer&& sublayer) const {
  const float p = ctx.dropout(dropout);
  if (pre_norm) {
    // x + Dropout(Sublayer(LayerNorm(x))): the sum is left to the next LayerNorm.
    ops::SumAndNorm in = normalize(stream, norm);
    Tensor branch = sublayer(in.normed);
    const uint64_t seed = p > 0 ? ctx.next_seed() : 0;
    return {in.sum, branch, p, seed};
  }
  // LayerNorm(x + Dropout(branch)) in one op.
  const Tensor x = settle(stream);
  Tensor branch = sublayer(x);
  const uint64_t seed = p > 0 ? ctx.next_seed() : 0;
  return Residual(
      ops::add_dropout_layer_norm(x, branch, p, seed, norm.weight, norm.bias, norm.eps));
}

namespace {
FeedForward feed_forward(const ModelConfig& c, const ParameterSource& source,
                         const std::string& name) {
  return FeedForward(c.d_model, c.d_ff, source, name, activation_named(c.activation));
}
ResidualNorm residual(const ModelConfig& c, const ParameterSource& source,
                      const std::string& name) {
  return ResidualNorm{LayerNorm(c.d_model, static_cast<float>(c.layer_norm_eps), source, name),
                      c.pre_norm(), static_cast<float>(c.dropout)};
}
MultiHeadAttention attention(const ModelConfig& c, const ParameterSource& source,
                             const std::string& name) {
  return MultiHeadAttention(c.d_model, static_cast<int>(c.heads), c.d_k, c.d_v, c.attention_bias,
                            static_cast<float>(c.attention_dropout), source, name);
}
}  // namespace

// The parameters' names are those of collect() below.
EncoderLayer::EncoderLayer(const ModelConfig& c, const ParameterSource& source,
                           const std::string& prefix)
    : self_attn(attention(c, source, prefix + "self_attn.")),
      self_attn_block(residual(c, source, prefix + "self_attn_norm.")),
      ffn(feed_forward(c, source, prefix + "ffn.")),
      ffn_block(residual(c, source, prefix + "ffn_norm.")) {}

Residual EncoderLayer::forward(const Residual& x, const ops::AttentionMask& source_mask,
                               ForwardContext& ctx) const {
  Residual h = self_attn_block.apply(
      x, ctx, [&](const Tensor& in) { return self_attn.forward(in, in, source_mask, ctx); });
  return ffn_block.apply(h, ctx,
                         [&](const Tensor& in) { return ffn.forward(in, ctx.precision()); });
}

void EncoderLayer::init(std::mt19937_64& rng) {
  self_attn.init(rng);
  ffn.init(rng);
}

void EncoderLayer::pack(DType precision) {
  self_attn.pack(precision);
  ffn.pack(precision);
}

void EncoderLayer::collect(const std::string& prefix, NamedTensors& out) const {
  self_attn.collect(prefix + "self_attn.", out);
  self_attn_block.norm.collect(prefix + "self_attn_norm.", out);
  ffn.collect(prefix + "ffn.", out);
  ffn_block.norm.collect(prefix + "ffn_norm.", out);
}

DecoderLayer::DecoderLayer(const ModelConfig& c, const ParameterSource& source,
                           const std::string& prefix)
    : self_attn(attention(c, source, prefix + "self_attn.")),
      self_attn_block(residual(c, source, prefix + "self_attn_norm.")),
      cross_attn(attention(c, source, prefix + "cross_attn.")),
      cross_attn_block(residual(c, source, prefix + "cross_attn_norm.")),
      ffn(feed_forward(c, source, prefix + "ffn.")),
      ffn_block(residual(c, source, prefix + "ffn_norm.")) {}

Residual DecoderLayer::forward(const Residual& y, const Tensor& memory,
                               const ops::AttentionMask& self_mask,
                               const ops::AttentionMask& source_mask, ForwardContext& ctx) const {
  Residual h = self_attn_block.apply(
      y, ctx, [&](const Tensor& in) { return self_attn.forward(in, in, self_mask, ctx); });
  h = cross_attn_block.apply(
      h, ctx, [&](const Tensor& in) { return cross_attn.forward(in, memory, source_mask, ctx); });
  return ffn_block.apply(h, ctx,
                         [&](const Tensor& in) { return ffn.forward(in, ctx.precision()); });
}

Residual DecoderLayer::forward_step(const Residual& y, KeyValueCache& self_cache,
                                    const KeyValueCache& cross_cache,
                                    const ops::AttentionMask& source_mask, int64_t beam,
                                    DType precision, Tensor* self_probs,
                                    Tensor* cross_probs) const {
  auto ctx = ForwardContext::inference(precision);
  const int64_t rows = y.x.dim(0), steps = y.x.dim(1), d = y.x.dim(2);
  Residual h = self_attn_block.apply(y, ctx, [&](const Tensor& in) {
    // The new positions see every cached one and, among themselves, the earlier ones.
    ops::AttentionMask causal;
    causal.causal = true;
    causal.query_offset = self_cache.length;
    return self_attn.append_and_attend(in, self_cache, causal, precision, self_probs);
  });
  h = cross_attn_block.apply(h, ctx, [&](const Tensor& in) {
    // The beam rows of a source are consecutive, so [sources * beam, steps, d] read as
    // [sources, beam * steps, d] makes them the queries of one attention over that source.
    Tensor queries = in.view({rows / beam, beam * steps, d});
    return cross_attn.attend(queries, cross_cache, source_mask, precision, cross_probs)
        .view({rows, steps, d});
  });
  return ffn_block.apply(h, ctx, [&](const Tensor& in) { return ffn.forward(in, precision); });
}

void DecoderLayer::init(std::mt19937_64& rng) {
  self_attn.init(rng);
  cross_attn.init(rng);
  ffn.init(rng);
}

void DecoderLayer::pack(DType precision) {
  self_attn.pack(precision);
  cross_attn.pack(precision);
  ffn.pack(precision);
}

void DecoderLayer::collect(const std::string& prefix, NamedTensors& out) const {
  self_attn.collect(prefix + "self_attn.", out);
  self_attn_block.norm.collect(prefix + "self_attn_norm.", out);
  cross_attn.collect(prefix + "cross_attn.", out);
  cross_attn_block.norm.collect(prefix + "cross_attn_norm.", out);
  ffn.collect(prefix + "ffn.", out);
  ffn_block.norm.collect(prefix + "ffn_norm.", out);
}

Transformer::Transformer(const ModelConfig& config) : Transformer(config, ParameterSource()) {
  init(1);
}

Transformer::Transformer(const ModelConfig& config, const NamedTensors& weights)
    : Transformer(config, ParameterSource(weights)) {}

// The parameters' names are those of named_parameters() below.
Transformer::Transformer(const ModelConfig& config, const ParameterSource& source)
    : config_(config) {
  // Each distinct vocabulary matrix made once; tied ones are the same tensor.
  const VocabularyMatrices names = vocabulary_matrices(config);
  const Shape vocabulary{config.vocab_size, config.d_model};
  source_embedding_ = source.make(names.source, vocabulary);
  target_embedding_ =
      names.target == names.source ? source_embedding_ : source.make(names.target, vocabulary);
  output_weight_ =
      names.output == names.target ? target_embedding_ : source.make(names.output, vocabulary);
  if (config.output_bias) output_bias_ = source.make("output_projection.bias", {config.vocab_size});
  if (config.learned_positions()) {
    encoder_positions_ =
        source.make("encoder.positions.weight", {config.max_positions, config.d_model});
    decoder_positions_ =
        source.make("decoder.positions.weight", {config.max_positions, config.d_model});
  } else {
    // On the device of the weights (a model built from GPU tensors adds them there).
    sinusoids_ = sinusoidal_positions(std::min(config.max_positions, kBuiltPositions),
                                      config.d_model, 0, config.sinusoid)
                     .to(output_weight_.device());
  }
  for (int64_t i = 0; i < config.layers; ++i)
    encoder_layers_.emplace_back(config, source, "encoder.layers." + std::to_string(i) + ".");
  for (int64_t i = 0; i < config.decoder_depth(); ++i)
    decoder_layers_.emplace_back(config, source, "decoder.layers." + std::to_string(i) + ".");
  if (config.pre_norm()) {
    const auto eps = static_cast<float>(config.layer_norm_eps);
    encoder_final_norm_ = LayerNorm(config.d_model, eps, source, "encoder.final_norm.");
    decoder_final_norm_ = LayerNorm(config.d_model, eps, source, "decoder.final_norm.");
  }
}

void Transformer::init(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f,
                                         1.0f / std::sqrt(static_cast<float>(config_.d_model)));
  auto fill_normal = [&](Tensor& t) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = normal(rng);
  };
  fill_normal(source_embedding_);
  if (!target_embedding_.same_storage(source_embedding_)) fill_normal(target_embedding_);
  if (!output_weight_.same_storage(target_embedding_)) fill_normal(output_weight_);
  if (output_bias_.defined()) output_bias_.fill(0.0f);
  if (encoder_positions_.defined()) {
    fill_normal(encoder_positions_);
    fill_normal(decoder_positions_);
  }
  for (auto& layer : encoder_layers_) layer.init(rng);
  for (auto& layer : decoder_layers_) layer.init(rng);
}

NamedTensors Transformer::named_parameters() const {
  NamedTensors out;
  const VocabularyMatrices names = vocabulary_matrices(config_);
  out.emplace_back(names.source, source_embedding_);
  if (names.target != names.source) out.emplace_back(names.target, target_embedding_);
  if (names.output != names.target) out.emplace_back(names.output, output_weight_);
  if (output_bias_.defined()) out.emplace_back("output_projection.bias", output_bias_);
  if (encoder_positions_.defined())
    out.emplace_back("encoder.positions.weight", encoder_positions_);
  for (size_t i = 0; i < encoder_layers_.size(); ++i)
    encoder_layers_[i].collect("encoder.layers." + std::to_string(i) + ".", out);
  if (encoder_final_norm_.weight.defined()) encoder_final_norm_.collect("encoder.final_norm.", out);
  if (decoder_positions_.defined())
    out.emplace_back("decoder.positions.weight", decoder_positions_);
  for (size_t i = 0; i < decoder_layers_.size(); ++i)
    decoder_layers_[i].collect("decoder.layers." + std::to_string(i) + ".", out);
  if (decoder_final_norm_.weight.defined()) decoder_final_norm_.collect("decoder.final_norm.", out);
  return out;
}

std::vector<Tensor> Transformer::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

void Transformer::load(const NamedTensors& values) {
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : values) by_name[name] = &tensor;
  for (auto& [name, param] : named_parameters()) {
    auto it = by_name.find(name);
    TFM_CHECK(it != by_name.end(), "parameter '{}' is missing", name);
    const Tensor& src = *it->second;
    TFM_CHECK(src.shape() == param.shape() && src.dtype() == param.dtype(),
              "parameter '{}' is {}, expected {}", name, src.describe(), param.describe());
    param.copy_from(src);
  }
}

void Transformer::set_dropout(double p) {
  TFM_CHECK(p >= 0 && p < 1, "dropout {} must be in [0, 1)", p);
  config_.dropout = p;
  const auto residual = static_cast<float>(p);
  for (auto& layer : encoder_layers_) {
    layer.self_attn_block.dropout = residual;
    layer.ffn_block.dropout = residual;
  }
  for (auto& layer : decoder_layers_) {
    layer.self_attn_block.dropout = residual;
    layer.cross_attn_block.dropout = residual;
    layer.ffn_block.dropout = residual;
  }
}

void Transformer::pack(DType precision) {
  for (auto& layer : encoder_layers_) layer.pack(precision);
  for (auto& layer : decoder_layers_) layer.pack(precision);
}

std::pair<Tensor, int64_t> Transformer::position_table(const Tensor& learned, int64_t position,
                                                       int64_t count) const {
  // Position p reads row p + position_offset (fairseq's tables start at padding_idx + 1).
  const int64_t first = position + config_.position_offset;
  const int64_t length = first + count;
  if (learned.defined()) {
    TFM_CHECK(length <= learned.dim(0), "sequence of {} tokens exceeds max_positions {}{}",
              position + count, learned.dim(0),
              config_.position_offset == 0
                  ? std::string()
                  : fmt::format(" less position_offset {}", config_.position_offset));
    return {learned, first};
  }
  if (length <= sinusoids_.dim(0)) return {sinusoids_, first};
  // Only the rows asked for: a decoding step past the table needs one.
  return {sinusoidal_positions(count, config_.d_model, first, config_.sinusoid)
              .to(output_weight_.device()),
          0};
}

Tensor Transformer::embed(const Tensor& ids, const Tensor& table, const Tensor& positions,
                          ForwardContext& ctx, int64_t offset) const {
  const float scale =
      config_.scale_embeddings ? std::sqrt(static_cast<float>(config_.d_model)) : 1.0f;
  Tensor x = ops::add_positions(ops::embedding(ids, table, scale), positions, offset);
  float p = ctx.dropout(static_cast<float>(config_.dropout));
  return p > 0 ? ops::dropout(x, p, ctx.next_seed()) : x;
}

Tensor Transformer::encode(const Tensor& src, const std::vector<int32_t>& src_lengths,
                           ForwardContext& ctx) const {
  ops::AttentionMask mask;
  mask.key_lengths = src_lengths;
  const auto [positions, offset] = position_table(encoder_positions_, 0, src.dim(1));
  Residual x{embed(src, source_embedding_, positions, ctx, offset)};
  for (const auto& layer : encoder_layers_) x = layer.forward(x, mask, ctx);
  return finish(x, encoder_final_norm_);
}

Tensor Transformer::decode(const Tensor& tgt_in, const Tensor& memory,
                           const std::vector<int32_t>& src_lengths, ForwardContext& ctx) const {
  ops::AttentionMask self_mask;
  self_mask.causal = true;
  ops::AttentionMask source_mask;
  source_mask.key_lengths = src_lengths;
  const auto [positions, offset] = position_table(decoder_positions_, 0, tgt_in.dim(1));
  Residual y{embed(tgt_in, target_embedding_, positions, ctx, offset)};
  for (const auto& layer : decoder_layers_)
    y = layer.forward(y, memory, self_mask, source_mask, ctx);
  return finish(y, decoder_final_norm_);
}

DecoderState Transformer::start_decoding(const Tensor& memory,
                                         const std::vector<int32_t>& src_lengths, int64_t beam,
                                         int64_t capacity, DType precision) const {
  TFM_CHECK(memory.rank() == 3 && memory.dim(2) == config_.d_model &&
                memory.dim(0) == static_cast<int64_t>(src_lengths.size()),
            "start_decoding: memory {} does not fit {} source lengths and d_model {}",
            memory.describe(), src_lengths.size(), config_.d_model);
  TFM_CHECK(beam >= 1 && capacity >= 1, "start_decoding: beam {} and capacity {} must be >= 1",
            beam, capacity);
  DecoderState state;
  state.source_lengths = src_lengths;
  state.beam = beam;
  state.precision = precision;
  const int64_t rows = memory.dim(0) * beam;
  for (const auto& layer : decoder_layers_) {
    DecoderState::Layer cache;
    cache.self = layer.self_attn.empty_cache(rows, capacity, precision);
    cache.cross =
        layer.cross_attn.empty_cache(memory.dim(0), std::max<int64_t>(memory.dim(1), 1), precision);
    layer.cross_attn.append(memory, cache.cross, precision);
    state.layers.push_back(std::move(cache));
  }
  return state;
}

Tensor Transformer::decode_step(const Tensor& last_tokens, DecoderState& state,
                                StepAttention* attention) const {
  return output_logits(decode_hidden(last_tokens, state, attention), state.precision);
}

namespace {

// [sources, h, beam, S] (one attention per source, its beam rows as the queries) -> host
// [sources * beam, h, S]: row r = source * beam + i.
Tensor cross_weights_by_row(const Tensor& probs, int64_t beam) {
  const int64_t sources = probs.dim(0), heads = probs.dim(1), keys = probs.dim(3);
  Tensor out = Tensor::empty({sources * beam, heads, keys});
  const Tensor host_probs = probs.to(Device::cpu);
  const float* from = host_probs.data<float>();
  float* to = out.data<float>();
  for (int64_t s = 0; s < sources; ++s)
    for (int64_t head = 0; head < heads; ++head)
      for (int64_t i = 0; i < beam; ++i)
        std::copy_n(from + ((s * heads + head) * beam + i) * keys, keys,
                    to + ((s * beam + i) * heads + head) * keys);
  return out;
}

}  // namespace

Tensor Transformer::decode_hidden(const Tensor& last_tokens, DecoderState& state,
                                  StepAttention* attention) const {
  TFM_CHECK(last_tokens.rank() == 1 && last_tokens.dim(0) == state.rows() &&
                last_tokens.dtype() == DType::i32,
            "decode_step: last tokens {} must be i32 [{}] (one per decoder row)",
            last_tokens.describe(), state.rows());
  TFM_CHECK(state.layers.size() == decoder_layers_.size(),
            "decode_step: the state has {} layers, the model {}", state.layers.size(),
            decoder_layers_.size());
  const int64_t rows = state.rows(), position = state.length();
  ops::AttentionMask source_mask;
  source_mask.key_lengths = state.source_lengths;
  if (attention) {
    TFM_CHECK(attention->layer < static_cast<int64_t>(decoder_layers_.size()),
              "decode_step: attention layer {} is outside [0, {})", attention->layer,
              decoder_layers_.size());
    attention->self.clear();
    attention->cross.clear();
  }

  auto ctx = ForwardContext::inference(state.precision);
  const auto [positions, offset] = position_table(decoder_positions_, position, 1);
  Residual y{embed(last_tokens.view({rows, 1}), target_embedding_, positions, ctx, offset)};
  for (size_t i = 0; i < decoder_layers_.size(); ++i) {
    const bool kept =
        attention && (attention->layer < 0 || attention->layer == static_cast<int64_t>(i));
    const bool want_self = kept && attention->want_self;
    const bool want_cross = kept && attention->want_cross;
    Tensor self_probs, cross_probs;
    y = decoder_layers_[i].forward_step(
        y, state.layers[i].self, state.layers[i].cross, source_mask, state.beam, state.precision,
        want_self ? &self_probs : nullptr, want_cross ? &cross_probs : nullptr);
    // [rows, h, 1, t] -> [rows, h, t]; the weights are read on the host.
    if (want_self)
      attention->self.push_back(
          self_probs.to(Device::cpu).view({rows, self_probs.dim(1), self_probs.dim(3)}));
    if (want_cross) attention->cross.push_back(cross_weights_by_row(cross_probs, state.beam));
  }
  return finish(y, decoder_final_norm_).view({rows, config_.d_model});
}

void DecoderState::select(const std::vector<int64_t>& rows) {
  const int64_t old_rows = this->rows();
  TFM_CHECK(rows.size() % static_cast<size_t>(beam) == 0,
            "decoder state: {} rows selected, not a multiple of the beam {}", rows.size(), beam);
  std::vector<int64_t> sources_kept;
  for (size_t g = 0; g < rows.size(); g += static_cast<size_t>(beam)) {
    int64_t source = -1;
    for (size_t i = g; i < g + static_cast<size_t>(beam); ++i) {
      TFM_CHECK(rows[i] >= 0 && rows[i] < old_rows, "decoder state: row {} selected from {} rows",
                rows[i], old_rows);
      if (source < 0) source = rows[i] / beam;
      TFM_CHECK(rows[i] / beam == source,
                "decoder state: new rows {}..{} mix sources {} and {} (beam {})", g,
                g + static_cast<size_t>(beam) - 1, source, rows[i] / beam, beam);
    }
    sources_kept.push_back(source);
  }
  bool same_rows = static_cast<int64_t>(rows.size()) == old_rows;
  for (size_t r = 0; same_rows && r < rows.size(); ++r)
    same_rows = rows[r] == static_cast<int64_t>(r);
  if (same_rows) return;
  bool same_sources = static_cast<int64_t>(sources_kept.size()) == sources();
  for (size_t s = 0; same_sources && s < sources_kept.size(); ++s)
    same_sources = sources_kept[s] == static_cast<int64_t>(s);
  for (auto& layer : layers) {
    layer.self.reorder(rows);
    if (!same_sources) layer.cross = layer.cross.gather(sources_kept);
  }
  if (!same_sources) {
    std::vector<int32_t> lengths;
    for (int64_t s : sources_kept) lengths.push_back(source_lengths[static_cast<size_t>(s)]);
    source_lengths = std::move(lengths);
  }
}

void DecoderState::widen(int64_t new_beam) {
  TFM_CHECK(beam == 1 && new_beam >= 1, "decoder state: cannot widen beam {} to {}", beam,
            new_beam);
  std::vector<int64_t> rows;
  for (int64_t s = 0; s < sources(); ++s)
    for (int64_t i = 0; i < new_beam; ++i) rows.push_back(s);
  for (auto& layer : layers) layer.self.reorder(rows);
  beam = new_beam;
}

Tensor Transformer::output_logits(const Tensor& hidden, DType precision) const {
  return ops::linear(hidden, output_weight_, output_bias_, {precision});
}

Tensor Transformer::forward(const Batch& batch, ForwardContext& ctx) const {
  Tensor memory = encode(batch.src, batch.src_lengths, ctx);
  return output_logits(decode(batch.tgt_in, memory, batch.src_lengths, ctx), ctx.precision());
}

ops::CrossEntropyResult Transformer::loss(const Batch& batch, ForwardContext& ctx,
                                          double normalizer, float consistency_weight) const {
  const bool paired = consistency_weight > 0;
  TFM_CHECK(!paired || !output_bias_.defined(),
            "R-Drop's consistency loss needs a model without an output bias (output_bias)");
  // R-Drop: the rows twice, each copy with its own dropout.
  const Batch doubled = paired ? batch.twice() : Batch{};
  const Batch& input = paired ? doubled : batch;
  // The projection and the loss together, in chunks of rows: the [B * T, V] logits never exist.
  Tensor memory = encode(input.src, input.src_lengths, ctx);
  Tensor hidden = decode(input.tgt_in, memory, input.src_lengths, ctx);
  const int64_t rows = hidden.numel() / config_.d_model;
  const Tensor targets = input.tgt_out.view({rows});
  const auto smoothing = static_cast<float>(config_.label_smoothing);
  if (paired) {
    ops::CrossEntropyResult result =
        ops::paired_output_cross_entropy(hidden, output_weight_, targets, smoothing, config_.pad_id,
                                         consistency_weight, 2 * normalizer, 0, ctx.precision());
    result.nll_sum /= 2;
    result.tokens /= 2;
    return result;
  }
  if (output_bias_.defined()) {
    // The fused loss has no bias: the [B * T, V] logits, then their cross-entropy.
    const Tensor logits =
        output_logits(ops::reshape(hidden, {rows, config_.d_model}), ctx.precision());
    return ops::cross_entropy(logits, targets, smoothing, config_.pad_id, normalizer);
  }
  return ops::output_cross_entropy(hidden, output_weight_, targets, smoothing, config_.pad_id,
                                   normalizer, 0, ctx.precision());
}

}  // namespace tfm::internal::nn
