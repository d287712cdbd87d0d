// The attention that tfm translate reads from its search: the probe --alignment asks for, and
// the --attention-output records.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tfm/decode/translate.h"
#include "tfm/model/config.h"

namespace tfm::internal::data {
class Vocabulary;
}

namespace tfm::internal::cli {

// The attention that --alignment reads: the mean over the heads of --alignment-layer (by default
// the last layer, which aligned best on the Multi30k model of docs/ATTENTION.md; Garg et al. 2019
// found the next to last best in a 6-layer model), or of every layer ("all"). Any other value is
// an error naming it.
decode::AttentionProbe alignment_probe(const std::string& alignment_layer,
                                       const ModelConfig& config);

// One --attention-output record: the best translation's attention of input line `line` (0-based)
// in decoder layer `layer`, of head `head` (< 0: the mean of the heads).
nlohmann::json attention_record(const data::Vocabulary& vocab, int64_t layer, int64_t head,
                                size_t line, const std::string& text,
                                const decode::Hypothesis& best);

}  // namespace tfm::internal::cli
