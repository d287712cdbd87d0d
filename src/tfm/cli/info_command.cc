#include "tfm/cli/commands.h"

namespace tfm::cli {

void register_info(CLI::App& app) {
  app.add_subcommand("info", "Print a configuration's parameter count and FLOPs per token");
}

}  // namespace tfm::cli
