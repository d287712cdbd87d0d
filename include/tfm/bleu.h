// Corpus BLEU as sacreBLEU computes it (docs/BLEU.md): the same tokenizers, smoothing and
// signature, equal to sacreBLEU's score to every printed digit. Or the paper's tokenized BLEU:
// tokenize "moses" (Moses tokenizer.perl -l language, then multi-bleu.perl), split_compounds for
// its EN-DE score.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tfm/export.h"

namespace tfm {

struct BleuOptions {
  // "13a", "intl", "none" (text already tokenized), "moses" (tokenized BLEU: needs smooth "none")
  std::string tokenize = "13a";
  bool lowercase = false;
  std::string smooth = "exp";   // "exp", "floor", "add-k", "none"
  std::string language = "en";  // of tokenize "moses": "en", "de", "fr"; unused by the others
  // a-b -> a ##AT##-##AT## b after tokenizing (tokenize "moses" or "none", smooth "none")
  bool split_compounds = false;
};

struct BleuResult {
  double score = 0;                // 0..100
  std::vector<double> precisions;  // n-gram precisions in percent, orders 1..4
  double brevity_penalty = 0;
  int64_t hypothesis_length = 0;
  int64_t reference_length = 0;
  std::string signature;  // e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
  // sacreBLEU's "BLEU|<signature> = 34.56 67.8/45.6/... (BP = ...)"; multi-bleu.perl's
  // "BLEU|<signature> = 34.56, 67.8/45.6/... (BP=...)" for tokenize "moses" or split_compounds.
  std::string line;
};

// references[k] is the k-th set of references, one per hypothesis. A tfm::Error for unequal
// lengths, no hypotheses, invalid UTF-8 or an unknown option name.
TFM_API BleuResult corpus_bleu(const std::vector<std::string>& hypotheses,
                               const std::vector<std::vector<std::string>>& references,
                               const BleuOptions& options = {});

}  // namespace tfm
