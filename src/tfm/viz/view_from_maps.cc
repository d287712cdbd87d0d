#include "tfm/viz/view_from_maps.h"

#include <algorithm>

#include "tfm/core/error.h"
#include "tfm/decode/alignment.h"

namespace tfm::internal::viz {

namespace {

// A kind from a [layers, heads, Q, K] tensor, merged into words when asked.
AttentionKind make_kind(const char* name, const char* title, bool causal, const Tensor& weights,
                        const std::vector<std::string>& queries,
                        const std::vector<std::string>& keys, bool merge_words) {
  const int64_t layers = weights.dim(0), heads = weights.dim(1);
  const int64_t Q = weights.dim(2), K = weights.dim(3);
  TFM_CHECK(static_cast<int64_t>(queries.size()) == Q && static_cast<int64_t>(keys.size()) == K,
            "attention view: {} weights {} for {} query and {} key tokens", name,
            weights.describe(), queries.size(), keys.size());
  AttentionKind kind{name, title, queries, keys, causal, layers, heads, {}};
  const float* p = weights.data<float>();
  if (!merge_words) {
    kind.weights.assign(p, p + weights.numel());
    return kind;
  }
  const std::vector<int64_t> query_words = decode::word_of_pieces(queries);
  const std::vector<int64_t> key_words = decode::word_of_pieces(keys);
  kind.queries = decode::join_words(queries, query_words);
  kind.keys = decode::join_words(keys, key_words);
  for (int64_t m = 0; m < layers * heads; ++m) {
    const std::vector<float> one(p + m * Q * K, p + (m + 1) * Q * K);
    const std::vector<float> merged = decode::merge_to_words(one, query_words, key_words);
    kind.weights.insert(kind.weights.end(), merged.begin(), merged.end());
  }
  return kind;
}

}  // namespace

AttentionView view_from_maps(const decode::AttentionMaps& maps,
                             const std::vector<std::string>& source_pieces,
                             const std::vector<std::string>& target_pieces, bool merge_words) {
  TFM_CHECK(static_cast<int64_t>(source_pieces.size()) == maps.source_length &&
                static_cast<int64_t>(target_pieces.size()) + 1 == maps.target_length,
            "attention view: {} source and {} target pieces for maps of {} and {} + eos",
            source_pieces.size(), target_pieces.size(), maps.source_length, maps.target_length - 1);
  std::vector<std::string> inputs{"<s>"}, outputs = target_pieces;
  inputs.insert(inputs.end(), target_pieces.begin(), target_pieces.end());
  outputs.emplace_back("</s>");
  AttentionView view;
  view.merged_words = merge_words;
  view.kinds.push_back(make_kind("encoder", "Encoder self-attention", false, maps.encoder,
                                 source_pieces, source_pieces, merge_words));
  view.kinds.push_back(make_kind("decoder", "Decoder self-attention", true, maps.decoder, inputs,
                                 inputs, merge_words));
  view.kinds.push_back(make_kind("cross", "Encoder-decoder attention", false, maps.cross, outputs,
                                 source_pieces, merge_words));
  return view;
}

}  // namespace tfm::internal::viz
