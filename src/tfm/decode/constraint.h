// Constrained search: a Constraint says, for every hypothesis of a search, which tokens may come
// next and whether it may end (emit eos). The searches (greedy, beam, n-best, batched; search.h)
// keep one ConstraintState per live hypothesis, advanced token by token as the hypothesis grows,
// and mask the step's log-probabilities with it before choosing the best tokens: a disallowed token
// is never chosen, a hypothesis with nothing allowed drops out. Without a constraint the searches
// run exactly as they would without this file. docs/DECODING.md ("Constrained search") shows how
// a task writes one; tasks/tree_constraint.h is the parser's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tfm::internal::decode {

// The constraint's view of one hypothesis: what it has produced so far, in whatever form makes
// the next question cheap (a parser keeps its open brackets, not the tokens).
class ConstraintState {
 public:
  virtual ~ConstraintState() = default;
  // An independent copy: a beam hypothesis continued by several tokens gets one per continuation.
  virtual std::unique_ptr<ConstraintState> clone() const = 0;
  // Appends to `tokens` every token other than eos allowed next (in any order; a token listed twice
  // counts once). Ids must be inside the model's vocabulary.
  virtual void allowed(std::vector<int32_t>& tokens) const = 0;
  // Whether the hypothesis may end here: eos allowed next.
  virtual bool may_end() const = 0;
  // The hypothesis takes `token`, one that allowed() listed (never eos: a hypothesis that ends
  // needs no state).
  virtual void advance(int32_t token) = 0;

  // How the allowed tokens are scored. By default each by the model's log-probability of it. A
  // state may name one allowed token that stands for a choice the input has already spelled out (a
  // parser's leaf, which copies the input's next word): that token then scores the log of the total
  // probability of `members`, log sum_{t in members} p(t), which is the probability of making the
  // choice here whatever the model would have spelled; with no members it scores 0, a token that
  // an earlier choice made certain (the rest of a word of several pieces).
  struct Pooled {
    int32_t token = -1;                             // -1: none
    const std::vector<int32_t>* members = nullptr;  // nullptr or empty: the token scores 0
  };
  virtual Pooled pooled() const { return {}; }
};

// Makes each source's first state. A search gives a hypothesis at most max_length tokens, eos
// included, and one that reaches max_length without eos is cut there: a constraint whose outputs
// must be complete allows nothing but eos when one token is left.
class Constraint {
 public:
  virtual ~Constraint() = default;
  // The state of source `source`'s empty hypothesis; `source` indexes the sources as the caller of
  // the search (decode::translate) received them.
  virtual std::unique_ptr<ConstraintState> start(int64_t source, int64_t max_length) const = 0;
};

}  // namespace tfm::internal::decode
