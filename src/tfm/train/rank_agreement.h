// What the ranks of a data-parallel job must share before training (train/training_run.cc): rank
// 0's vocabulary, the same recipe and data, and a sensible number of threads per rank.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tfm/data/vocab.h"
#include "tfm/dist/communicator.h"

namespace tfm::internal {

// Rank 0's vocabulary on every rank: rank 0 passes its own (`vocab`), the others get a copy of
// its file's bytes (no shared file system needed).
data::Vocabulary share_vocabulary(dist::Communicator& communicator,
                                  std::optional<data::Vocabulary> vocab);

// Fails on every rank, naming the ranks and the part, when a part differs from rank 0's. Each
// part is a name and a text that describes it on this rank (e.g. the model configuration's JSON).
struct AgreementPart {
  std::string name;
  std::string description;
};
void check_ranks_agree(dist::Communicator& communicator, const std::vector<AgreementPart>& parts);

// Rank 0's text on every rank.
std::string broadcast_text(dist::Communicator& communicator, const std::string& text);

// The ranks on this host, from the launcher's local rank count (1 when none says).
int local_ranks();

// OpenMP threads for one rank when neither the recipe nor OMP_NUM_THREADS says: the cores shared
// by the ranks on this host (from the launcher's local rank count), at least 1.
int default_threads_per_rank();

}  // namespace tfm::internal
