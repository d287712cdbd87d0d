#include "tfm/serve/request_framing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace tfm::internal::serve {

namespace {

RequestFrame refused(RequestFrame frame, int status, std::string message) {
  frame.state = RequestFrame::State::kRefused;
  frame.status = status;
  frame.message = std::move(message);
  return frame;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// The first byte of a line that is a control character (a tab is allowed), or -1.
int control_character(std::string_view line) {
  for (char c : line) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && byte != '\t') || byte == 0x7f) return byte;
  }
  return -1;
}

// The lines of the header block (without their "\r\n" or "\n"), the request line first; the
// block's length through the blank line, or 0 if the blank line has not come yet.
size_t header_lines(std::string_view bytes, std::vector<std::string_view>& lines) {
  size_t start = 0;
  while (true) {
    const size_t end = bytes.find('\n', start);
    if (end == std::string_view::npos) return 0;
    std::string_view line = bytes.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = end + 1;
    if (line.empty() && !lines.empty()) return start;
    if (!line.empty()) lines.push_back(line);  // empty lines before a request are skipped
  }
}

}  // namespace

RequestFrame frame_request(std::string_view bytes, size_t max_header_bytes, size_t max_body_bytes) {
  RequestFrame frame;
  std::vector<std::string_view> lines;
  frame.header_bytes = header_lines(bytes.substr(0, max_header_bytes), lines);
  if (frame.header_bytes == 0) {
    if (bytes.size() < max_header_bytes) return frame;
    return refused(
        frame, 431,
        fmt::format("request headers longer than the maximum {} bytes", max_header_bytes));
  }
  const std::string_view request_line = lines.front();
  const size_t target = request_line.find(' ');
  if (target != std::string_view::npos)
    frame.path = std::string(
        request_line.substr(target + 1, request_line.find_first_of(" ?", target + 1) - target - 1));
  std::string_view length;
  bool has_length = false, has_encoding = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (const int c = control_character(lines[i]); c >= 0)
      return refused(frame, 400,
                     fmt::format("a control character (byte 0x{:02x}) in the {}", c,
                                 i == 0 ? "request line" : "request headers"));
    if (i == 0) continue;
    const size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;  // httplib refuses the request: 400
    const std::string_view name = lines[i].substr(0, colon);
    const std::string_view value = trimmed(lines[i].substr(colon + 1));
    if (same_name(name, "Transfer-Encoding")) has_encoding = true;
    if (same_name(name, "Expect") && same_name(value, "100-continue")) frame.expect_continue = true;
    if (!same_name(name, "Content-Length")) continue;
    if (value.empty() ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return refused(frame, 400,
                     fmt::format("Content-Length '{}' is not a number of bytes", value));
    if (has_length && value != length)
      return refused(
          frame, 400,
          fmt::format("two different Content-Length headers ({} and {})", length, value));
    has_length = true;
    length = value;
  }
  if (has_length && has_encoding)
    return refused(frame, 400, "both Content-Length and Transfer-Encoding in one request");
  frame.chunked = has_encoding;
  // httplib reads a body without either until the client closes: a thread held for nothing.
  const std::string_view method = request_line.substr(0, target);
  if (!has_length && !has_encoding &&
      (method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE"))
    return refused(frame, 411,
                   "a request body needs a Content-Length (or Transfer-Encoding: chunked)");
  if (has_length) {
    const std::string_view digits =
        length.substr(std::min(length.find_first_not_of('0'), length.size()));
    const std::string limit = std::to_string(max_body_bytes);
    if (digits.size() > limit.size() || (digits.size() == limit.size() && digits > limit))
      return refused(
          frame, 413,
          fmt::format("request body larger than the maximum {} bytes (Content-Length {})",
                      max_body_bytes, length));
    frame.body_bytes = digits.empty() ? 0 : std::stoull(std::string(digits));
  }
  if (frame.chunked || bytes.size() - frame.header_bytes >= frame.body_bytes)
    frame.state = RequestFrame::State::kComplete;
  return frame;
}

}  // namespace tfm::internal::serve
