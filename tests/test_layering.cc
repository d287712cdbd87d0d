// The layers (docs/ARCHITECTURE.md, "The layers") as include rules: each folder of src/tfm includes
// headers of the folders below it only. data/ (corpus, vocabulary, batching) and nn/ (the modules)
// are independent of each other; train/ bridges them (train/model_batch.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "build_paths.h"

namespace tfm::internal::testing {
namespace {

// "file: line" for every #include of `forbidden` (e.g. "tfm/nn/") in the files of src/tfm/<folder>.
std::string includes_of(const std::string& folder, const std::string& forbidden) {
  std::string found;
  const std::filesystem::path dir = std::filesystem::path(tfm_source_dir()) / "src/tfm" / folder;
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
      // Other frameworks' models in and out (tfm convert): files to a model directory.
      {"convert", {"core", "io", "model", "data"}},
      {"eval", {"core", "io", "model", "nn", "data", "decode", "tasks", "translation"}},
      {"viz", {"core", "io", "model", "nn", "data", "decode"}},
      {"serve", {"core", "io", "model", "data", "decode", "translation", "eval"}},
      // The sweep trains each row through the public tfm::train (api/train.cc), as a user would.
      {"sweep",
       {"core", "io", "model", "data", "dist", "train", "decode", "eval", "translation", "api"}},
      {"api",
       {"core", "ops", "io", "model", "nn", "data", "dist", "train", "decode", "tasks", "eval",
        "viz", "translation"}},
      {"cli",
       {"core", "ops", "io", "model", "nn", "data", "dist", "train", "decode", "tasks", "eval",
        "api", "viz", "serve", "translation", "sweep", "convert"}},
  };
  return table;
}

TEST(Layering, EveryFolderIncludesOnlyTheLayersBelowIt) {
  const std::filesystem::path root = std::filesystem::path(tfm_source_dir()) / "src/tfm";
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

// tfm:: holds only what include/tfm declares (docs/ARCHITECTURE.md, "Namespaces"): every layer
// opens tfm::internal or a namespace below it; only api/, which implements the public names,
// opens tfm, and core/error.cc, which defines the constructor of the tfm::Error every layer throws.
TEST(Layering, InternalsLiveInTfmInternal) {
  const std::filesystem::path root = std::filesystem::path(tfm_source_dir()) / "src/tfm";
  std::string broken;
  int internal_openings = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const bool api = entry.path().parent_path().filename() == "api";
    const bool may_open_tfm = api || entry.path().lexically_relative(root) == "core/error.cc";
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (!line.starts_with("namespace tfm")) continue;
      const bool internal = line.starts_with("namespace tfm::internal {") ||
                            line.starts_with("namespace tfm::internal::");
      internal_openings += internal;
      if (!(internal && !api) && !(may_open_tfm && line == "namespace tfm {"))
        broken += entry.path().string() + ":" + std::to_string(number) + ": " + line + "\n";
    }
  }
  EXPECT_EQ(broken, "");
  EXPECT_GT(internal_openings, 250);  // the scan saw the layers' files
}

// The CPU kernel sets (kernels/cpu/isa.h): the library outside kernels/cpu/ is compiled for the
// baseline x86-64, where a kernels/cpu header would name the x86-64-v2 set and bypass the dispatch;
// it includes isa_dispatch.h alone. Inside, every file opens the set's inline namespace, so that
// two sets' functions never share a name (the ODR), and isa_dispatch.cc, compiled once, opens none.
TEST(Layering, CpuKernelSetsAreReachedThroughTheDispatchAlone) {
  const std::filesystem::path root = std::filesystem::path(tfm_source_dir()) / "src/tfm";
  std::string broken;
  int set_files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string relative = entry.path().lexically_relative(root).string();
    const bool in_cpu = relative.starts_with("kernels/cpu/");
    const bool dispatch =
        relative.starts_with("kernels/cpu/isa_dispatch.") || relative == "kernels/cpu/isa.h";
    bool opens_set = false;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line == "inline namespace TFM_CPU_ISA {") opens_set = true;
      if (!in_cpu && line.starts_with("#include \"tfm/kernels/cpu/") &&
          line != "#include \"tfm/kernels/cpu/isa_dispatch.h\"")
        broken += relative + ":" + std::to_string(number) + ": " + line + "\n";
    }
    if (in_cpu && !dispatch && !opens_set) broken += relative + ": opens no kernel-set namespace\n";
    if (dispatch && opens_set) broken += relative + ": is compiled once, not per kernel set\n";
    set_files += in_cpu && opens_set;
  }
  EXPECT_EQ(broken, "");
  EXPECT_GT(set_files, 40);  // the scan saw kernels/cpu/
}

TEST(Layering, DataAndNnDoNotIncludeEachOther) {
  EXPECT_EQ(includes_of("data", "tfm/nn/"), "");
  EXPECT_EQ(includes_of("nn", "tfm/data/"), "");
}

// cli/ parses flags, calls one entry point of a layer below (translation/, sweep/, serve/, train's
// tfm::train, eval's BLEU, ...) and prints: the work is in those layers, where the library, the
// Python bindings and the server reach it too. Two checks keep it so. (1) cli/ includes no header
// of the work's internals: not the modules and their gradients (nn/, autograd/, kernels/), not the
// search (decode/'s search, scorer, alignment and scoring), not the training run's parts (train/
// but checkpoint.h, whose average_models is `tfm average`'s one call). (2) No command file passes
// kMaxCliFileLines: past that a command has grown logic (a pipeline, a resumable loop) that
// belongs in a service below it.
constexpr int kMaxCliFileLines = 300;

TEST(Layering, CliOnlyParsesCallsAndPrints) {
  const std::set<std::string> forbidden_layers = {"nn", "autograd", "kernels"};
  const std::set<std::string> forbidden_headers = {"decode/search.h", "decode/transformer_scorer.h",
                                                   "decode/alignment.h", "decode/score.h"};
  std::string broken;
  const std::filesystem::path dir = std::filesystem::path(tfm_source_dir()) / "src/tfm/cli";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::ifstream in(entry.path());
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      ++lines;
      if (!line.starts_with("#include \"tfm/")) continue;
      const std::string header = line.substr(14, line.find('"', 14) - 14);  // "decode/search.h"
      const std::string layer = header.substr(0, header.find('/'));
      if (forbidden_layers.contains(layer) || forbidden_headers.contains(header) ||
          (layer == "train" && header != "train/checkpoint.h"))
        broken += name + " includes tfm/" + header + "\n";
    }
    if (lines > kMaxCliFileLines)
      broken += name + ": " + std::to_string(lines) + " lines, more than " +
                std::to_string(kMaxCliFileLines) + "\n";
  }
  EXPECT_EQ(broken, "");
  // Validation BLEU lives in eval/ and the sweep in sweep/: cli/ only wires them.
  EXPECT_FALSE(std::filesystem::exists(dir / "validation_bleu.cc"));
  EXPECT_FALSE(std::filesystem::exists(dir / "sweep_evaluation.cc"));
  EXPECT_EQ(includes_of("train", "tfm/eval/"), "");
  EXPECT_EQ(includes_of("eval", "tfm/cli/"), "");
}

}  // namespace
}  // namespace tfm::internal::testing
