// Teacher-forced scoring, as CTranslate2's score_batch: the log-probability the model gives each
// token of known targets y1..yn eos, every token predicted from the source and the target tokens
// before it. One encoder and one decoder pass per batch (no search, no cache).
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/core/dtype.h"
#include "tfm/decode/inference_model.h"

namespace tfm::internal::decode {

struct ScoreOptions {
  int64_t batch_size = 32;  // sentence pairs per batch
};

struct TargetScore {
  std::vector<float> token_log_probs;  // log p(y_t | y_<t, x) for y1..yn, then eos
  double log_prob = 0;                 // their sum (in double)
};

// Scores targets[i] given sources[i] (token ids without bos/eos). A source must be non-empty and
// no longer than max_input_length(); with learned positions a target (eos included) must fit the
// position table. Errors name the sentence.
// The products run in the model's precision, with its packed weights.
std::vector<TargetScore> score(const InferenceModel& model,
                               const std::vector<std::vector<int32_t>>& sources,
                               const std::vector<std::vector<int32_t>>& targets,
                               const ScoreOptions& options = {});

}  // namespace tfm::internal::decode
