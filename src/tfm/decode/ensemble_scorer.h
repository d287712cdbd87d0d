// Several models decoding together (an ensemble, as Marian's --models and fairseq's path1:path2):
// each step's distribution is the mean of the members' probabilities,
//   log p(t | prefix) = log (1/N sum_i p_i(t | prefix))
//                     = m + log sum_i exp(log p_i(t) - m) - log N,   m = max_i log p_i(t),
// so that it stays a distribution (the search's scores and length penalty mean what they mean for
// one model). The members must share the vocabulary; each keeps its own decoder state and
// select() reorders them all alike.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tfm/decode/search.h"

namespace tfm::internal::decode {

class EnsembleScorer final : public StepScorer {
 public:
  // At least one member, all with the same rows() and vocab_size().
  explicit EnsembleScorer(std::vector<std::unique_ptr<StepScorer>> members);

  int64_t rows() const override { return members_.front()->rows(); }
  int64_t vocab_size() const override { return members_.front()->vocab_size(); }
  // The mean of the members' probabilities, on the host ([rows(), vocab_size()] f32). A member's
  // NaN or +inf is fail_non_finite (an entry that is -inf in every member stays -inf).
  Tensor step(const std::vector<int32_t>& last_tokens) override;
  // The m best tokens of step()'s rows (the same values), without computing every entry: the mean
  // v(t) lies in [a(t) - log N, a(t)] where a(t) is the largest member log-probability, so a token
  // whose a(t) is below the m-th largest a minus log N cannot be among the m best, and only the
  // others' means are computed.
  void step_top(const std::vector<int32_t>& last_tokens, int64_t m, int32_t excluded,
                StepTop& out) override;
  void select(const std::vector<int64_t>& rows) override;

 private:
  // Every member's step() on the host; a NaN or +inf is fail_non_finite.
  std::vector<Tensor> member_steps(const std::vector<int32_t>& last_tokens);

  std::vector<std::unique_ptr<StepScorer>> members_;
  int64_t steps_ = 0;  // step() calls so far: the decoding step errors name
};

}  // namespace tfm::internal::decode
