// Minimum Bayes risk (MBR) choice of a translation from its n-best list (Kumar and Byrne 2004; for
// neural translation, Eikema and Aziz 2020). Beam search returns the hypothesis the model scores
// highest; MBR returns the one the list agrees with most, which is nearer what BLEU rewards when
// the model spreads its probability over near-paraphrases. The n best stand for the model's
// distribution, each weighted by the softmax of its score (log p / length penalty) over the list,
// and each candidate h_i gets the expected utility
//   E[u(h_i)] = sum_j w_j u(h_i, h_j),   w_j = exp(s_j / T) / sum_k exp(s_k / T),
// with u(h, r) sentence BLEU / 100 of h against r as its one reference: sacreBLEU's 13a tokens and
// add-1 smoothing of the orders 2 to 4 (Lin and Och 2004's, sacreBLEU's `add-k`), so that a short
// candidate without a matching 4-gram still counts. u(h, h) = 1 for any non-empty h.
//
// `tfm translate --mbr` (docs/DECODING.md, "Minimum Bayes risk") chooses this way from its
// --n-best list; the list's size and T (--mbr-temperature) were chosen on Multi30k's validation
// set.
#pragma once

#include <string>
#include <vector>

#include "tfm/translation/text_translation.h"

namespace tfm::internal::data {
class Vocabulary;
}

namespace tfm::internal::eval {

struct MbrOptions {
  double temperature = 1.0;  // T above: > 0; small T trusts the model's scores, large T the list
  // Every candidate weighs the same, w_j = 1 / n (T unused): for candidates drawn from the model
  // (decode/sampling.h), whose frequencies already estimate its distribution; a sample drawn twice
  // counts twice.
  bool uniform = false;
};

// The utility u(hypothesis, reference) above: sentence BLEU / 100 with 13a tokens and add-1
// smoothing (0 when no unigram matches, or for an empty hypothesis).
double mbr_utility(const std::string& hypothesis, const std::string& reference);

// E[u(h_i)] of every candidate text given their scores (as many as texts, finite). Throws
// tfm::Error for unequal sizes, no candidates, a non-finite score, a temperature that is not a
// positive finite number, or invalid UTF-8.
std::vector<double> mbr_expected_utilities(const std::vector<std::string>& texts,
                                           const std::vector<double>& scores,
                                           const MbrOptions& options = {});

// The index of the candidate with the highest expected utility (the first of equals, so the
// model's order breaks ties).
size_t mbr_choice(const std::vector<std::string>& texts, const std::vector<double>& scores,
                  const MbrOptions& options = {});

// Moves the MBR choice of each n-best list to its front (the others keep their order), the texts
// detokenized by `vocab` as tfm translate writes them. Lists of fewer than two hypotheses stay as
// they are.
void choose_by_mbr(const data::Vocabulary& vocab, std::vector<translation::NBest>& lists,
                   const MbrOptions& options = {});

}  // namespace tfm::internal::eval
