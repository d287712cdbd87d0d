// tfm::corpus_bleu: the public face of eval::corpus_bleu.
#include "tfm/bleu.h"

#include "tfm/eval/bleu.h"

namespace tfm {

using namespace internal;  // the library's layers, which these public calls wrap

BleuResult corpus_bleu(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references,
                       const BleuOptions& options) {
  eval::BleuOptions internal;
  internal.tokenizer = eval::bleu_tokenizer_from_name(options.tokenize);
  internal.lowercase = options.lowercase;
  internal.smoothing = eval::bleu_smoothing_from_name(options.smooth);
  internal.moses_language = eval::moses_language_from_name(options.language);
  internal.split_compounds = options.split_compounds;
  const eval::BleuScore score = eval::corpus_bleu(hypotheses, references, internal);
  BleuResult result;
  result.score = score.score;
  result.precisions = score.precisions;
  result.brevity_penalty = score.bp;
  result.hypothesis_length = score.sys_len;
  result.reference_length = score.ref_len;
  result.signature = score.signature;
  result.line = eval::is_moses_bleu(internal) ? score.format_multi_bleu(true) : score.format(true);
  return result;
}

}  // namespace tfm
