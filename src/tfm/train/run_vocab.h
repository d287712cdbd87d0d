// The vocabulary of a training run. Learned into the run directory (vocab.model), it is recorded
// with what it was learned from (vocab.recipe.json: type, size, sample, seed, and the size and
// CRC-32 of both training files), so that a run directory whose recipe or data changed never
// silently reuses a stale vocabulary.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "tfm/data/vocab.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {

// The run's vocabulary: data.vocab when given; else run_dir/vocab.model, learned when missing.
// An existing one whose record differs from the recipe (or that has no record) is learned again
// when the run has no checkpoints yet (`has_checkpoints` false), saying what changed; with
// checkpoints a difference is an error, since the checkpoints were trained with it.
data::Vocabulary prepare_run_vocabulary(const TrainRecipe& recipe,
                                        const std::filesystem::path& run_dir, bool has_checkpoints,
                                        const std::function<void(const std::string&)>& say);

// Refuses a checkpoint whose vocab.model is not the run's vocabulary (replaced in the run
// directory, or data.vocab pointed elsewhere), naming both files.
void check_checkpoint_vocabulary(const data::Vocabulary& vocab,
                                 const std::filesystem::path& checkpoint_dir);

}  // namespace tfm::internal
