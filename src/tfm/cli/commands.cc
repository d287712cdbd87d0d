#include "tfm/cli/commands.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace tfm::internal::cli {

namespace {

// Refuses "nan", "inf" and what overflows to an infinity (1e400): CLI::Range lets NaN through
// (every comparison with it is false), and no float option of tfm means anything non-finite.
const CLI::Validator& finite_number() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "";  // not a number: the type check says so
        if (!std::isfinite(value) || errno == ERANGE)
          return "must be a finite number in range, got '" + text + "'";
        return "";
      },
      "", "FINITE");
  return validator;
}

// Every floating-point option of every command (CLI11 names their type FLOAT) gets the check, so
// that an option added later cannot miss it.
void require_finite_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options())
    if (option->get_type_name().rfind("FLOAT", 0) == 0) option->check(finite_number());
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    require_finite_numbers(*command);
}

}  // namespace

void register_commands(CLI::App& app) {
  register_info(app);
  register_vocab(app);
  register_corpus(app);
  register_average(app);
  register_convert(app);
  register_train(app);
  register_sweep(app);
  register_translate(app);
  register_attention(app);
#ifdef TFM_HAVE_SERVE  // a build with the server's libraries (CMakeLists.txt)
  register_serve(app);
#endif
  register_bleu(app);
  register_evalb(app);
  register_linearise(app);
  register_parse(app);
  require_finite_numbers(app);
}

}  // namespace tfm::internal::cli
