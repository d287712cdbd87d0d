// BPE-dropout (Provilkov, Emelianenko and Voita 2020, "BPE-Dropout: Simple and Effective Subword
// Regularization"): each time a training pair is batched its sentences are segmented anew, every
// BPE merge skipped with probability p, so the model meets each word in many segmentations and
// learns its pieces' parts from little data. Translation segments as before (p = 0). The targets
// may keep their plain segmentation (`targets` false): the decoder then learns one segmentation to
// predict while the encoder still meets many.
//
// A pair is segmented anew from its ids: decoded to its text, then encoded with SentencePiece's
// sampled encoding. SentencePiece draws from a per-thread generator that a thread seeds at its
// first draw from one process-wide seed; so a batch is segmented on threads started after setting
// that seed to the batch's key (one thread for the sources, one for the targets, and a lock so that
// two batches never share the seed): the same key gives the same segmentation, in a resumed run
// and on every rank too.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/data/vocab.h"

namespace tfm::internal::data {

class SubwordDropout {
 public:
  // `vocab` (a BPE model, Vocabulary::is_bpe) must outlive this. A new segmentation longer than
  // max_length (a source) or max_length - 1 (a target: bos or eos is added) is not used; <= 0: no
  // limit. `targets`: the targets too, else the sources only. Throws when p is outside (0, 1) or
  // the vocabulary is not BPE.
  SubwordDropout(const Vocabulary& vocab, double probability, int64_t max_length,
                 bool targets = true);

  // The sequences (ids without bos/eos) segmented anew, drawn from `key`. A sequence holding <unk>
  // keeps its ids (its text would not encode back to them), as does one whose new segmentation is
  // over the length limit.
  void resegment(std::vector<std::vector<int32_t>>& sources,
                 std::vector<std::vector<int32_t>>& targets, uint64_t key) const;

  double probability() const { return probability_; }
  bool targets() const { return targets_; }

 private:
  void resegment_side(std::vector<std::vector<int32_t>>& sequences, int64_t longest) const;

  const Vocabulary& vocab_;
  double probability_;
  int64_t max_length_;
  bool targets_;
};

}  // namespace tfm::internal::data
