// One row of `tfm sweep` measured on the validation set (docs/TABLE3.md): the averaged model's
// perplexity per subword, from the unsmoothed cross-entropy of teacher-forced scoring (label
// smoothing only shapes the training loss), and the corpus BLEU of its beam-search translations.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "tfm/model/config.h"
#include "tfm/model/table3.h"

namespace tfm::internal::sweep {

struct SweepEvaluation {
  std::filesystem::path model_dir;  // the averaged model, with its vocab.model
  ModelConfig expected;             // the row's configuration: the model must have it
  std::string valid_source, valid_target;
  int64_t max_bleu_sentences = 0;  // the first this many are translated; 0: all
  int64_t beam_size = 4;
  double alpha = 0.6;
  std::string precision = "f32";
  std::string device = "cpu";
  int threads = 0;                   // 0: all cores
  std::filesystem::path hypotheses;  // the translations are written here
};

// Fills config, parameters, perplexity, ppl_tokens, bleu, bleu_sentences and eval_seconds.
Table3Result evaluate_sweep_row(const SweepEvaluation& evaluation);

}  // namespace tfm::internal::sweep
