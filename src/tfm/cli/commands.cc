#include "tfm/cli/commands.h"

namespace tfm::cli {

void register_commands(CLI::App& app) {
  register_info(app);
  register_vocab(app);
  register_corpus(app);
  register_average(app);
  register_train(app);
  register_sweep(app);
  register_translate(app);
  register_attention(app);
  register_serve(app);
  register_bleu(app);
  register_evalb(app);
  register_linearise(app);
  register_parse(app);
}

}  // namespace tfm::cli
