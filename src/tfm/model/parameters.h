// The model's parameters by name and shape (docs/MODEL_FORMAT.md), their count, and the forward
// pass's floating-point operations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/core/shape.h"
#include "tfm/model/config.h"

namespace tfm::internal {

struct ParameterSpec {
  std::string name;
  Shape shape;
};

// Every parameter of the model in its canonical order (the order of model.safetensors), with the
// PyTorch nn.Linear layout weight [out, in]. The configuration is valid (config.h: validated where
// it entered), as for every function here.
std::vector<ParameterSpec> parameter_specs(const ModelConfig& config);

// The names of the source embedding, the target embedding and the pre-softmax projection
// (tie_embeddings: "all" names embedding.weight three times, "decoder" gives the target's name
// twice), and the distinct names among them in parameter order.
struct VocabularyMatrices {
  std::string source;
  std::string target;
  std::string output;
};
VocabularyMatrices vocabulary_matrices(const ModelConfig& config);
std::vector<std::string> vocabulary_matrix_names(const ModelConfig& config);

int64_t parameter_count(const ModelConfig& config);

struct ParameterBreakdown {
  int64_t embedding = 0;  // the source/target embeddings, pre-softmax projection and its bias
  int64_t positions = 0;  // learned position tables (both), zero with sinusoids
  int64_t encoder = 0;    // encoder layers (+ final norm with pre-norm)
  int64_t decoder = 0;    // decoder layers (+ final norm with pre-norm)
  int64_t total() const { return embedding + positions + encoder + decoder; }
};
ParameterBreakdown parameter_breakdown(const ModelConfig& config);

// Forward FLOPs of one sentence pair with `source_length` source and `target_length` target tokens,
// counting a multiply-add as 2 FLOPs and only matrix products (embedding lookups, softmax,
// LayerNorm, biases, ReLU and dropout are O(tokens * d) and left out). Attention is counted in
// full: the decoder's causal self-attention is charged the whole T x T score matrix, as a dense
// kernel computes it, not the half a causal-aware kernel would need. With d = d_model, S, T the
// lengths:
//   encoder layer:  2*S*d*h*(2*d_k + d_v)      Q, K, V projections
//                 + 2*S*S*h*(d_k + d_v)        scores Q K^T and the weighted sum of V
//                 + 2*S*h*d_v*d                output projection
//                 + 4*S*d*d_ff                 FFN (two matrices)
//   decoder layer:  the same with T for self-attention and the FFN, plus cross-attention:
//                   2*T*d*h*d_k + 2*S*d*h*(d_k + d_v) + 2*T*S*h*(d_k + d_v) + 2*T*h*d_v*d
//   output:         2*T*d*V                    logits over the vocabulary
struct ForwardFlops {
  int64_t source_length = 0;
  int64_t target_length = 0;
  double encoder = 0;  // all encoder layers
  double decoder =
      0;  // all decoder layers, including cross-attention's K/V projections of the source
  double output = 0;  // pre-softmax projection onto the vocabulary
  double per_pair() const { return encoder + decoder + output; }
  double per_source_token() const { return encoder / static_cast<double>(source_length); }
  double per_target_token() const {
    return (decoder + output) / static_cast<double>(target_length);
  }
  // The pair's FLOPs spread over all of its tokens, source and target.
  double per_token() const {
    return per_pair() / static_cast<double>(source_length + target_length);
  }
};
ForwardFlops forward_flops(const ModelConfig& config, int64_t source_length, int64_t target_length);

// forward_flops(...).per_token(): a pair's forward FLOPs / (source_length + target_length).
double forward_flops_per_token(const ModelConfig& config, int64_t source_length,
                               int64_t target_length);

}  // namespace tfm::internal
