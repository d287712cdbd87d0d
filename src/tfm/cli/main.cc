// tfm: the command line. Subcommands live in cli/<name>_command.cc; this file only wires them up.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"tfm: the Transformer of \"Attention Is All You Need\""};
  app.require_subcommand(1);
  // Usage errors are one line on stderr, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "tfm: error: " + std::string(e.what()) + " (see --help)\n";
  });
  tfm::cli::register_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tfm::Error& e) {
    std::fprintf(stderr, "tfm: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
