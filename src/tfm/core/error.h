// Errors: every failure the user can cause is a tfm::Error with a one-line message.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tfm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tfm

// TFM_CHECK(condition, "format {}", args...) throws tfm::Error when the condition is false.
#define TFM_CHECK(condition, ...) \
  do {                            \
    if (!(condition)) {           \
      ::tfm::fail(__VA_ARGS__);   \
    }                             \
  } while (false)
