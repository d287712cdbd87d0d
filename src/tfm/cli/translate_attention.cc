#include "tfm/cli/translate_attention.h"

#include <exception>

#include "tfm/core/error.h"
#include "tfm/data/vocab.h"
#include "tfm/translation/text_translation.h"

namespace tfm::internal::cli {

decode::AttentionProbe alignment_probe(const std::string& alignment_layer,
                                       const ModelConfig& config) {
  if (alignment_layer == "all") return {decode::AttentionProbe::kAllLayers, -1};
  if (alignment_layer.empty()) return {config.decoder_depth() - 1, -1};
  int64_t layer = -1;
  try {
    size_t used = 0;
    layer = std::stoll(alignment_layer, &used);
    if (used != alignment_layer.size()) layer = -1;
  } catch (const std::exception&) {
    layer = -1;
  }
  TFM_CHECK(layer >= 0 && layer < config.decoder_depth(),
            "--alignment-layer '{}': expected a decoder layer 0..{} or 'all'", alignment_layer,
            config.decoder_depth() - 1);
  return {layer, -1};
}

nlohmann::json attention_record(const data::Vocabulary& vocab, int64_t layer, int64_t head,
                                size_t line, const std::string& text,
                                const decode::Hypothesis& best) {
  std::vector<std::string> target_pieces = translation::pieces(vocab, best.tokens);
  if (best.ended_by_eos) target_pieces.emplace_back("</s>");
  return {{"line", line + 1},
          {"layer", layer},
          {"head", head < 0 ? nlohmann::json("mean") : nlohmann::json(head)},
          {"source_pieces", vocab.pieces(text)},
          {"target_pieces", target_pieces},
          {"weights", best.attention}};
}

}  // namespace tfm::internal::cli
