// Corpus BLEU as sacreBLEU computes it (docs/BLEU.md): the same tokenizers, smoothing and
// signature, equal to sacreBLEU's score to every printed digit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfm {

struct BleuOptions {
  std::string tokenize = "13a";  // "13a", "intl", "none" (text already tokenized)
  bool lowercase = false;
  std::string smooth = "exp";  // "exp", "floor", "add-k", "none"
};

struct BleuResult {
  double score = 0;                // 0..100
  std::vector<double> precisions;  // n-gram precisions in percent, orders 1..4
  double brevity_penalty = 0;
  int64_t hypothesis_length = 0;
  int64_t reference_length = 0;
  std::string signature;  // e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
  std::string line;       // sacreBLEU's "BLEU|<signature> = 34.56 67.8/45.6/... (BP = ...)"
};

// references[k] is the k-th set of references, one per hypothesis. A tfm::Error for unequal
// lengths, no hypotheses, invalid UTF-8 or an unknown option name.
BleuResult corpus_bleu(const std::vector<std::string>& hypotheses,
                       const std::vector<std::vector<std::string>>& references,
                       const BleuOptions& options = {});

}  // namespace tfm
