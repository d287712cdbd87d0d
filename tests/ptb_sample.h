// Where the tests find NLTK's Penn Treebank sample (../shared/data/ptb-sample/README.md).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "build_paths.h"

namespace tfm::internal::testing {

// $TFM_DATA_DIR/ptb-sample, else ../shared/data/ptb-sample beside the source tree; "" when absent.
inline std::filesystem::path ptb_sample_dir() {
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("TFM_DATA_DIR"); env && *env)
    candidates.emplace_back(std::filesystem::path(env) / "ptb-sample");
  candidates.emplace_back(std::filesystem::path(tfm_source_dir()) / "../shared/data/ptb-sample");
  for (const auto& dir : candidates)
    if (std::filesystem::exists(dir / "wsj_sample.trees.gz")) return dir;
  return {};
}

}  // namespace tfm::internal::testing
