// The layers of DESIGN.md as include rules: data/ (corpus, vocabulary, batching) and nn/ (the
// modules) are independent of each other; train/ bridges them (train/model_batch.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
