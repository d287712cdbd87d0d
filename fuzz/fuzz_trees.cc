// Fuzz target: a file of bracketed trees as tfm evalb, linearise and parse --input-format trees
// read it (data::read_tree_file: one tree a line or .mrg text, plain or gzip), then what those
// commands do with the trees: write each back (it must read back the same), normalise and linearise
// it, make a tree of the sequence again (delinearise, repair: a tree over exactly the words), and
// EVALB the trees against themselves and against the repaired ones.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tfm/data/tree_sequences.h"
#include "tfm/data/trees.h"
#include "tfm/eval/evalb.h"

namespace {

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz: %s: [%s]\n", what, detail.c_str());
  std::abort();
}

void check_trees(const std::vector<tfm::internal::data::Tree>& trees) {
  using namespace tfm;
  std::vector<data::Tree> normalised, repaired;
  for (const data::Tree& tree : trees) {
    const std::string text = data::to_string(tree);
    if (data::parse_tree(text) != tree) finding("a written tree reads back differently", text);
    normalised.push_back(data::normalise(tree));
    // The normalised trees are what `tfm linearise --trees` writes as evalb's gold.
    const std::string gold = data::to_string(normalised.back());
    if (data::parse_tree(gold) != normalised.back())
      finding("a normalised tree reads back differently", gold);
    const std::vector<std::string> words = data::tree_words(normalised.back());
    const std::vector<std::string> tags = data::tree_tags(normalised.back());
    const std::string sequence = data::linearise(normalised.back());
    (void)data::delinearise(sequence, words, tags);
    repaired.push_back(data::repair(sequence, words, tags).tree);
    if (data::tree_words(repaired.back()) != words)
      finding("repair gave a tree over other words", sequence);
    (void)data::to_string(repaired.back());
  }
  for (const char* params : {"collins", "nk"}) {
    const eval::EvalbParams p = eval::evalb_params(params);
    const eval::EvalbResult same = eval::evalb(trees, trees, p);
    (void)eval::format_evalb(same);
    (void)eval::format_evalb_errors(same);
    (void)eval::format_evalb(eval::evalb(normalised, repaired, p));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path file = tfm::internal::fuzz::scratch_dir() / "trees.mrg";
  tfm::internal::fuzz::write_file(file, {reinterpret_cast<const char*>(data), size});
  std::vector<tfm::internal::data::Tree> trees;
  bool read = false;
  tfm::internal::fuzz::expect_only_tfm_errors([&] {
    trees = tfm::internal::data::read_tree_file(file);
    read = true;
  });
  if (!read) return 0;
  // Trees that were read are valid: any error from here on is a finding.
  try {
    check_trees(trees);
  } catch (const std::exception& e) {
    finding("an error on trees that were read", e.what());
  }
  return 0;
}
