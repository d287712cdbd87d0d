// The browser test's model (tests/browser/attention_page.test.mjs): writes OUT/model, the tiny
// random Transformer with a BPE vocabulary that the command-line tests use
// (testing::write_tiny_text_model: 2 layers), here with 4 heads, so that `tfm attention` can read
// text with it.
// Usage: tfm_browser_fixture OUT
#include <cstdio>
#include <exception>
#include <filesystem>

#include "text_model_test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: tfm_browser_fixture OUT\n", stderr);
    return 2;
  }
  try {
    std::filesystem::create_directories(argv[1]);
    tfm::internal::testing::write_tiny_text_model(argv[1], /*heads=*/4, /*seed=*/7);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tfm_browser_fixture: %s\n", error.what());
    return 1;
  }
}
