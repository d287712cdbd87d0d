// PLACEHOLDER, so that the branch builds: the lead's make_model.cc replaces this file. The real one
// writes ARGV[1]/model, a tiny random model with a SentencePiece vocabulary, for the browser test.
#include <cstdio>

int main() {
  std::fputs("tfm_browser_fixture: placeholder; the tiny model's writer is not in this tree yet\n",
             stderr);
  return 1;
}
