// The Transformer of section 3: encoder and decoder stacks of N layers, post-norm residual blocks
// (pre-norm as an option), one embedding matrix shared by both embeddings and the pre-softmax
// projection, scaled by sqrt(d_model), and sinusoidal (or learned) positions. The configuration's
// variant keys (activation, tie_embeddings, output_bias, scale_embeddings, sinusoid,
// position_offset) give the models of other toolkits (docs/MODEL_FORMAT.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfm/model/config.h"
#include "tfm/nn/attention.h"
#include "tfm/nn/batch.h"
#include "tfm/nn/layers.h"

namespace tfm::internal::nn {

// The residual stream between sub-layers: x, plus Dropout(branch) when `branch` is defined, not
// added yet. A pre-norm sub-layer leaves its sum to the next LayerNorm, which adds it in the same
// pass (ops::add_dropout_then_layer_norm); a post-norm stream is always added (no branch).
struct Residual {
  Residual() = default;
  explicit Residual(Tensor settled) : x(std::move(settled)) {}
  Residual(Tensor stream, Tensor pending, float dropout, uint64_t dropout_seed)
      : x(std::move(stream)), branch(std::move(pending)), p(dropout), seed(dropout_seed) {}

  Tensor x;
  Tensor branch;  // undefined: nothing pending
  float p = 0.0f;
  uint64_t seed = 0;
};

// The stream with its pending sum added, and `norm` of it.
ops::SumAndNorm normalize(const Residual& stream, const LayerNorm& norm);
// The stream with its pending sum added (x + Dropout(branch)).
Tensor settle(const Residual& stream);
// The end of a stack: `final_norm` of the stream (pre-norm models have one), else the stream.
Tensor finish(const Residual& stream, const LayerNorm& final_norm);

// x -> x + Dropout(Sublayer(x)) with the LayerNorm after (post-norm, the paper's) or before
// (pre-norm).
struct ResidualNorm {
  LayerNorm norm;
  bool pre_norm = false;
  float dropout = 0.0f;

  template <typename Sublayer>
  Residual apply(const Residual& stream, ForwardContext& ctx, Sublayer&& sublayer) const;
};

struct EncoderLayer {
  // prefix: "encoder.layers.<i>.", the start of its parameters' names.
  EncoderLayer(const ModelConfig& config, const ParameterSource& source = {},
               const std::string& prefix = "");
  Residual forward(const Residual& x, const ops::AttentionMask& source_mask,
                   ForwardContext& ctx) const;
  void init(std::mt19937_64& rng);
  void collect(const std::string& prefix, NamedTensors& out) const;
  void pack(DType precision);

  MultiHeadAttention self_attn;
  ResidualNorm self_attn_block;
  FeedForward ffn;
  ResidualNorm ffn_block;
};

struct DecoderLayer {
  DecoderLayer(const ModelConfig& config, const ParameterSource& source = {},
               const std::string& prefix = "");
  Residual forward(const Residual& y, const Tensor& memory, const ops::AttentionMask& self_mask,
                   const ops::AttentionMask& source_mask, ForwardContext& ctx) const;
  // One position of incremental decoding (inference): y [rows, 1, d_model] for rows = sources *
  // beam; appends the position's self-attention keys/values to self_cache; cross_cache holds the
  // encoder output's keys/values, one row per source, which the `beam` rows of that source query
  // together. self_probs: the self-attention weights [rows, h, 1, positions so far];
  // cross_probs: the encoder-decoder attention weights [sources, h, beam, S]. Products in
  // `precision`.
  Residual forward_step(const Residual& y, KeyValueCache& self_cache,
                        const KeyValueCache& cross_cache, const ops::AttentionMask& source_mask,
                        int64_t beam, DType precision, Tensor* self_probs = nullptr,
                        Tensor* cross_probs = nullptr) const;
  void init(std::mt19937_64& rng);
  void collect(const std::string& prefix, NamedTensors& out) const;
  void pack(DType precision);

  MultiHeadAttention self_attn;
  ResidualNorm self_attn_block;
  MultiHeadAttention cross_attn;
  ResidualNorm cross_attn_block;
  FeedForward ffn;
  ResidualNorm ffn_block;
};

// The attention weights of one decoding step's new position, per decoder layer, as host tensors
// (for looking at attention and for alignments; a few weights per row). The caller says which it
// wants by setting the flags and `layer`; the step fills the vectors (one tensor per layer kept).
struct StepAttention {
  bool want_self = false;   // self: [rows, h, positions so far (this one included)]
  bool want_cross = false;  // cross: [rows, h, S] (zero weight on a source's padding)
  int64_t layer = -1;       // >= 0: only this layer's weights (one tensor each); < 0: every layer
  std::vector<Tensor> self, cross;
};

// The state of incremental decoding (section 6.1) for a batch of source sentences with `beam`
// decoder rows each: row r continues a hypothesis of source r / beam. Per decoder layer it keeps
// the projected self-attention keys and values of every position decoded so far (one more per step)
// and the encoder-decoder keys and values, projected once from the encoder output.
struct DecoderState {
  struct Layer {
    KeyValueCache self;   // rows = sources * beam
    KeyValueCache cross;  // rows = sources; length = the padded source length
  };
  std::vector<Layer> layers;
  std::vector<int32_t> source_lengths;  // per source: the encoder-decoder attention's key mask
  int64_t beam = 1;
  DType precision = DType::f32;  // of every step's products, and of the caches' keys and values

  int64_t sources() const { return static_cast<int64_t>(source_lengths.size()); }
  int64_t rows() const { return sources() * beam; }
  // Positions decoded so far: the position of the next step's input token.
  int64_t length() const { return layers.empty() ? 0 : layers[0].self.length; }
  // Keeps rows without recomputing anything: new row i continues old row rows[i]. Each group of
  // `beam` consecutive new rows must come from a single old source (beams reordered within their
  // sentence; sentences dropped or, rarely, repeated); the number of sources follows. The
  // self-attention caches rewrite their slot tables (KeyValueCache::reorder), no keys or values
  // copied; the encoder-decoder caches are copied only when the list of sources changes.
  void select(const std::vector<int64_t>& rows);
  // From beam 1 to `new_beam` rows per source, each a copy of its source's row (the first step of
  // a beam search is the same for every beam: decode::TransformerScorer runs it once per source).
  void widen(int64_t new_beam);
};

class Transformer {
 public:
  // A model of random weights (init(1)), to be trained.
  explicit Transformer(const ModelConfig& config);
  // A model of these weights, adopted: every parameter must be present with its shape and dtype
  // f32 (extra tensors are ignored), and shares its storage with the given tensor (no copy, no
  // random initialisation): building a loaded model costs nothing beyond reading its file. The
  // model sees later changes to those tensors, and updates (training) write into them.
  Transformer(const ModelConfig& config, const NamedTensors& weights);

  // Random initialisation from a seed: Glorot-uniform projections, N(0, d_model^-0.5) embeddings
  // (so that the sqrt(d_model) scaling gives unit variance), LayerNorm 1/0, zero biases.
  void init(uint64_t seed);
  // Copies values from named tensors (shapes must match; every parameter must be present).
  void load(const NamedTensors& values);
  // Packs the weight of every linear (not the embedding) for inference products in `precision`
  // (Linear::pack); forward passes must then ask for that precision. An inference model does this
  // once, at load (decode::InferenceModel); a packed model must not change its weights after.
  void pack(DType precision);

  const ModelConfig& config() const { return config_; }
  // The residual and embedding dropout (config "dropout") from now on: a run chooses it once it
  // knows its budget (model.dropout auto, train/run_cadence.h).
  void set_dropout(double p);
  // (name, tensor) in the documented order (docs/MODEL_FORMAT.md).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;

  // Encoder output [B, S, d_model].
  Tensor encode(const Tensor& src, const std::vector<int32_t>& src_lengths,
                ForwardContext& ctx) const;
  // Decoder output before the projection, [B, T, d_model].
  Tensor decode(const Tensor& tgt_in, const Tensor& memory, const std::vector<int32_t>& src_lengths,
                ForwardContext& ctx) const;
  // Pre-softmax logits h E^T, [..., V], products in `precision`.
  Tensor output_logits(const Tensor& hidden, DType precision = DType::f32) const;

  Tensor forward(const Batch& batch, ForwardContext& ctx) const;

  // ---- incremental decoding (inference: no tape may be recording; decode/ builds the searches)
  // A state for decoding `beam` rows per source from `memory` = encode()'s output [sources, S,
  // d_model], with room for `capacity` target positions (grown when a decode runs longer). Its
  // steps multiply in `precision` (DecoderState::precision).
  DecoderState start_decoding(const Tensor& memory, const std::vector<int32_t>& src_lengths,
                              int64_t beam, int64_t capacity, DType precision = DType::f32) const;
  // Logits [rows, V] of every row's next token, given each row's last token (bos at the first
  // step), i32 [rows]. Computes the new position only, at position state.length(), and appends it
  // to the caches. `attention` (when given) receives this position's attention weights.
  Tensor decode_step(const Tensor& last_tokens, DecoderState& state,
                     StepAttention* attention = nullptr) const;
  // decode_step without the output projection: the decoder's output [rows, d_model], whose logits
  // are output_logits(hidden) (decode::TransformerScorer fuses that product with the search).
  Tensor decode_hidden(const Tensor& last_tokens, DecoderState& state,
                       StepAttention* attention = nullptr) const;
  // The pre-softmax projection [V, d_model] (the shared embedding matrix unless tie_embeddings is
  // "none"), and its bias [V] (undefined unless output_bias).
  const Tensor& output_embedding() const { return output_weight_; }
  const Tensor& output_bias() const { return output_bias_; }
  // Label-smoothed cross-entropy of the batch's targets (config's label_smoothing, pad ignored).
  // consistency_weight > 0 is R-Drop (Liang et al. 2021): the batch's rows go through the model
  // twice in one batch (Batch::twice), each copy with its own dropout, and the loss is
  // ops::paired_output_cross_entropy's with twice the normalizer, so that its cross-entropy is the
  // two passes' mean; nll_sum and tokens are the two passes' mean too.
  ops::CrossEntropyResult loss(const Batch& batch, ForwardContext& ctx, double normalizer = 0.0,
                               float consistency_weight = 0.0f) const;

 private:
  // dropout(E[ids] * sqrt(d_model) + positions[offset + t]), E the source or target embedding
  // (no sqrt(d_model) without scale_embeddings).
  Tensor embed(const Tensor& ids, const Tensor& table, const Tensor& positions, ForwardContext& ctx,
               int64_t offset = 0) const;
  // The table that holds positions [first, first + count) (their rows shifted by position_offset),
  // and the row of `first` in it.
  std::pair<Tensor, int64_t> position_table(const Tensor& learned, int64_t first,
                                            int64_t count) const;
  Transformer(const ModelConfig& config, const ParameterSource& source);

  ModelConfig config_;
  // The vocabulary matrices: one tensor three times (tie_embeddings "all"), two, or three.
  Tensor source_embedding_, target_embedding_, output_weight_;
  Tensor output_bias_;                            // output_bias only
  Tensor encoder_positions_, decoder_positions_;  // learned only
  // Sinusoidal encodings of positions [0, min(max_positions, kBuiltPositions)), computed once at
  // construction so that a model is immutable after it and can be shared across threads; positions
  // past it (sinusoids have no end) get rows of their own per call, so a large max_positions costs
  // nothing until a sequence that long comes.
  static constexpr int64_t kBuiltPositions = 1024;
  Tensor sinusoids_;
  std::vector<EncoderLayer> encoder_layers_;
  std::vector<DecoderLayer> decoder_layers_;
  LayerNorm encoder_final_norm_, decoder_final_norm_;  // pre-norm only
};

}  // namespace tfm::internal::nn
