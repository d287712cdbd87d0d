// An outside program: built against include/ and the library only (no src/ on its include path),
// it proves that the public headers stand alone. Usage: tfm_consumer [model-dir]
#include <tfm/tfm.h>
#include <tfm/version.h>

#include <cstdio>

int main(int argc, char** argv) {
  static_assert(TFM_VERSION_MAJOR >= 0 && TFM_VERSION_MINOR >= 0 && TFM_VERSION_PATCH >= 0);
  std::printf("tfm %s\n", TFM_VERSION);
  const auto bleu = tfm::corpus_bleu({"the cat sat on the mat"}, {{"the cat is on the mat"}});
  std::printf("%s\n", bleu.line.c_str());
  if (bleu.score < 37.99 || bleu.score > 38.0) return 1;
  try {
    tfm::Model::load(argc > 1 ? argv[1] : "no-such-model-dir");
    return 1;  // the fixture has no vocabulary: loading it must fail
  } catch (const tfm::Error& e) {
    std::printf("tfm::Error: %s\n", e.what());
  }
  return 0;
}
