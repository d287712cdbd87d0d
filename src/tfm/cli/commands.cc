#include "tfm/cli/commands.h"

namespace tfm::cli {

void register_commands(CLI::App& app) {
  register_info(app);
  register_bleu(app);
}

}  // namespace tfm::cli
