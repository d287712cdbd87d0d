// tfm: the command line. Subcommands live in cli/<name>_command.cc; this file only wires them up.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "tfm/cli/commands.h"
#include "tfm/core/error.h"

namespace {

// sacreBLEU spells lower-casing "-lc", which CLI11 would read as the short flags -l and -c; the
// one spelling is translated to --lowercase before parsing.
std::vector<std::string> translate_arguments(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& arg : args)
    if (arg == "-lc") arg = "--lowercase";
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> arguments = translate_arguments(argc, argv);
  std::vector<char*> translated;
  for (std::string& arg : arguments) translated.push_back(arg.data());
  CLI::App app{"tfm: the Transformer of \"Attention Is All You Need\""};
  app.require_subcommand(1);
  // Usage errors are one line on stderr, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "tfm: error: " + std::string(e.what()) + " (see --help)\n";
  });
  tfm::cli::register_commands(app);
  try {
    app.parse(argc, translated.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tfm::Error& e) {
    std::fprintf(stderr, "tfm: error: %s\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A file system failure the code did not word itself still names the path and the reason.
    std::fprintf(stderr, "tfm: error: %s: %s\n", e.path1().c_str(), e.code().message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
