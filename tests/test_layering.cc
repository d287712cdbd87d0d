// The layers (docs/ARCHITECTURE.md, "The layers") as include rules: each folder of src/tfm includes
// headers of the folders below it only. data/ (corpus, vocabulary, batching) and nn/ (the modules)
// are independent of each other; train/ bridges them (train/model_batch.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace tfm::testing {
namespace {

// "file: line" for every #include of `forbidden` (e.g. "tfm/nn/") in the files of src/tfm/<folder>.
std::string includes_of(const std::string& folder, const std::string& forbidden) {
  std::string found;
  const std::filesystem::path dir = std::filesystem::path(TFM_SOURCE_DIR) / "src/tfm" / folder;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line))
      if (line.starts_with("#include") && line.find("\"" + forbidden) != std::string::npos)
        found += entry.path().filename().string() + ": " + line + "\n";
  }
  return found;
}

// What each folder may include besides itself (docs/ARCHITECTURE.md's table).
const std::map<std::string, std::set<std::string>>& allowed_includes() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"core", {}},
      {"kernels", {"core"}},
      {"autograd", {"core"}},
      {"ops", {"core", "kernels", "autograd"}},
      {"io", {"core"}},
      {"dist", {"core"}},
      {"model", {"core", "io"}},
      {"nn", {"core", "ops", "model"}},
      {"data", {"core", "io", "model"}},
      {"train", {"core", "autograd", "ops", "io", "model", "nn", "data", "dist"}},
      {"decode", {"core", "ops", "nn", "model", "io"}},
      {"tasks", {"core", "io", "model", "nn", "data", "decode"}},
      {"translation", {"core", "ops", "io", "model", "nn", "data", "decode"}},
      {"eval", {"core", "io", "model", "nn", "data", "decode", "tasks", "translation"}},
      {"viz", {"core", "io", "model", "nn", "data", "decode"}},
      {"serve", {"core", "io", "model", "data", "decode", "translation"}},
      {"sweep", {"core", "io", "model", "data", "dist", "train", "decode", "eval", "translation"}},
      {"api",
       {"core", "ops", "io", "model", "nn", "data", "dist", "train", "decode", "tasks", "eval",
        "viz", "translation"}},
      {"cli",
       {"core", "ops", "io", "model", "nn", "data", "dist", "train", "decode", "tasks", "eval",
        "api", "viz", "serve", "translation", "sweep"}},
  };
  return table;
}

TEST(Layering, EveryFolderIncludesOnlyTheLayersBelowIt) {
  const std::filesystem::path root = std::filesystem::path(TFM_SOURCE_DIR) / "src/tfm";
  std::string broken;
  for (const auto& folder : std::filesystem::directory_iterator(root)) {
    const std::string layer = folder.path().filename().string();
    const auto rule = allowed_includes().find(layer);
    if (rule == allowed_includes().end()) {
      broken += "src/tfm/" + layer + " is not in the layer table\n";
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(folder.path())) {
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        if (!line.starts_with("#include \"tfm/")) continue;
        // "tfm/<folder>/x.h" is a layer's header; "tfm/x.h" a public one (include/tfm: the API,
        // self-contained, usable from any layer).
        const size_t slash = line.find('/', 14);
        if (slash == std::string::npos || slash > line.find('"', 14)) continue;
        const std::string other = line.substr(14, slash - 14);
        if (other != layer && !rule->second.contains(other))
          broken += entry.path().string() + ":" + std::to_string(number) + ": " + layer +
                    " includes tfm/" + other + "/\n";
      }
    }
  }
  EXPECT_EQ(broken, "");
}

TEST(Layering, DataAndNnDoNotIncludeEachOther) {
  EXPECT_EQ(includes_of("data", "tfm/nn/"), "");
  EXPECT_EQ(includes_of("nn", "tfm/data/"), "");
}

TEST(Layering, CliHoldsNoTrainingOrEvaluationLogic) {
  // Validation BLEU lives in eval/: cli/ only wires it into the training run.
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(TFM_SOURCE_DIR) /
                                       "src/tfm/cli/validation_bleu.cc"));
  EXPECT_EQ(includes_of("train", "tfm/eval/"), "");
  EXPECT_EQ(includes_of("eval", "tfm/cli/"), "");
}

}  // namespace
}  // namespace tfm::testing
