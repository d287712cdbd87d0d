// The attention view of a sentence pair: decode::attention_maps' weights with the tokens as the
// model sees them (SentencePiece pieces, "<s>" and "</s>"), or merged into words
// (decode/alignment.h: attention to a word summed over its pieces, from a word averaged).
#pragma once

#include <string>
#include <vector>

#include "tfm/decode/attention_maps.h"
#include "tfm/viz/attention_view.h"

namespace tfm::internal::viz {

// The three kinds, labelled:
//   encoder: queries and keys the source pieces x1..xS;
//   decoder: queries and keys the decoder's inputs "<s>" y1..yn (causal);
//   cross:   queries the tokens each step outputs, y1..yn "</s>"; keys the source pieces.
// target_pieces: y1..yn (maps.target_length - 1 of them).
AttentionView view_from_maps(const decode::AttentionMaps& maps,
                             const std::vector<std::string>& source_pieces,
                             const std::vector<std::string>& target_pieces, bool merge_words);

}  // namespace tfm::internal::viz
