#include "tfm/sweep/evaluation.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/threading.h"
#include "tfm/data/vocab.h"
#include "tfm/decode/score.h"
#include "tfm/decode/translate.h"
#include "tfm/eval/bleu.h"
#include "tfm/io/atomic_file.h"
#include "tfm/io/text_lines.h"
#include "tfm/model/parameters.h"
#include "tfm/translation/model_loading.h"
#include "tfm/translation/text_translation.h"

namespace tfm::internal::sweep {

Table3Result evaluate_sweep_row(const SweepEvaluation& e) {
  const auto start = std::chrono::steady_clock::now();
  set_num_threads(e.threads);
  const std::shared_ptr<const decode::InferenceModel> model = decode::load_inference_model(
      e.model_dir, translation::inference_options(e.precision, e.device));
  const ModelConfig& config = model->config();
  TFM_CHECK(config == e.expected,
            "{}: the model's configuration is not the row's ({}): its run directory was trained "
            "with another one; remove the row's folder to train it again",
            e.model_dir.string(), config_to_json(e.expected).dump());
  const data::Vocabulary vocab = translation::model_vocabulary(
      e.model_dir, config, "the sweep's averaged model needs its vocabulary");

  const std::vector<std::string> sources = read_text_lines(e.valid_source);
  const std::vector<std::string> targets = read_text_lines(e.valid_target);
  TFM_CHECK(sources.size() == targets.size(), "{} has {} lines but {} has {}", e.valid_source,
            sources.size(), e.valid_target, targets.size());
  decode::TranslateOptions options;
  options.beam_size = e.beam_size;
  options.alpha = e.alpha;
  std::vector<std::vector<int32_t>> source_ids, target_ids;
  for (size_t i = 0; i < sources.size(); ++i) {
    source_ids.push_back(vocab.encode(sources[i]));
    target_ids.push_back(vocab.encode_target(targets[i]));
  }

  // Perplexity: exp of the mean -log p over every target subword (eos included) of the pairs
  // with a source (training's validation refuses longer sources, so none is cut here).
  std::vector<std::vector<int32_t>> scored_sources, scored_targets;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (source_ids[i].empty()) continue;
    scored_sources.push_back(source_ids[i]);
    scored_targets.push_back(target_ids[i]);
  }
  TFM_CHECK(!scored_sources.empty(), "{}: no validation sentence to score", e.valid_source);
  decode::ScoreOptions score_options;
  score_options.batch_size = 64;
  double nll = 0;
  int64_t tokens = 0;
  for (const decode::TargetScore& s :
       decode::score(*model, scored_sources, scored_targets, score_options)) {
    nll -= s.log_prob;
    tokens += static_cast<int64_t>(s.token_log_probs.size());
  }

  // BLEU: beam search over the first max_bleu_sentences sources (longer ones cut, as validation
  // during training does); empty sources translate to empty lines.
  size_t count = sources.size();
  if (e.max_bleu_sentences > 0) count = std::min(count, static_cast<size_t>(e.max_bleu_sentences));
  const translation::LengthPolicy policy{decode::max_input_length(options, config),
                                         translation::LongInputs::cut};
  std::vector<std::vector<int32_t>> to_translate(
      source_ids.begin(), source_ids.begin() + static_cast<std::ptrdiff_t>(count));
  for (std::vector<int32_t>& ids : to_translate) translation::apply_length_policy(ids, policy, "");
  const decode::Translator translator(model, options, e.threads);
  const std::vector<translation::NBest> results = translation::translate_nonempty(
      to_translate,
      [&](const std::vector<std::vector<int32_t>>& ids) { return translator.translate(ids); });
  std::vector<std::string> hypotheses;
  for (const translation::NBest& nbest : results)
    hypotheses.push_back(translation::best_text(vocab, nbest));
  std::string text;
  for (const std::string& h : hypotheses) text += h + "\n";
  write_file_atomically(e.hypotheses, text);
  const std::vector<std::string> references(targets.begin(),
                                            targets.begin() + static_cast<std::ptrdiff_t>(count));

  Table3Result result;
  result.config = config;
  result.parameters = parameter_count(config);
  result.perplexity = std::exp(nll / static_cast<double>(tokens));
  result.ppl_tokens = tokens;
  result.bleu = eval::corpus_bleu(hypotheses, {references}).score;
  result.bleu_sentences = static_cast<int64_t>(count);
  result.eval_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  TFM_CHECK(std::isfinite(result.perplexity), "{}: the validation perplexity is not finite ({})",
            e.model_dir.string(), result.perplexity);
  return result;
}

}  // namespace tfm::internal::sweep
