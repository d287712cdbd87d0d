// Errors: every failure the user can cause is a tfm::Error with a one-line message.
#pragma once

#include <fmt/format.h>

#include <string>

#include "tfm/error.h"  // the public tfm::Error (include/tfm)

namespace tfm::internal {

// Control characters of quoted user text (a line break in a YAML key, a carriage return in a
// parser's message) as escapes, so that a message stays one line: "\n", "\r", "\x1b".
std::string one_line(const std::string& text);

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tfm::internal

// TFM_CHECK(condition, "format {}", args...) throws tfm::Error when the condition is false.
#define TFM_CHECK(condition, ...)         \
  do {                                    \
    if (!(condition)) {                   \
      ::tfm::internal::fail(__VA_ARGS__); \
    }                                     \
  } while (false)
