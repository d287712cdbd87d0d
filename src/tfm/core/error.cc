#include "tfm/core/error.h"

namespace tfm::internal {

std::string one_line(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if ((byte < 0x20 && c != '\t') || byte == 0x7f)
      out += fmt::format("\\x{:02x}", byte);
    else
      out += c;
  }
  return out;
}

}  // namespace tfm::internal

namespace tfm {

Error::Error(const std::string& message) : std::runtime_error(internal::one_line(message)) {}

}  // namespace tfm
