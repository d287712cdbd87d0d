// Where a request ends in the bytes read so far from a connection, and the requests refused before
// a thread is given to them: the server reads a whole request (headers and body) before a handler
// thread sees it (connections.h), so it must find the request's end itself. Headers that would make
// that end ambiguous or wait for bytes that will never be accepted are answered at once:
//   400  a control character (NUL ...) in the request line or a header; a Content-Length that is
//        not a plain number of bytes, or two that differ; Content-Length with Transfer-Encoding
//   411  a POST, PUT, PATCH or DELETE with neither Content-Length nor Transfer-Encoding
//   413  a Content-Length over the body limit (without reading the body)
//   431  headers longer than the header limit
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tfm::internal::serve {

struct RequestFrame {
  enum class State { kIncomplete, kComplete, kRefused };
  State state = State::kIncomplete;
  size_t header_bytes = 0;       // the request line and headers, through the blank line
  size_t body_bytes = 0;         // Content-Length (0 without one)
  bool chunked = false;          // Transfer-Encoding: the body's end is found while it is read
  bool expect_continue = false;  // "Expect: 100-continue": the client waits for a 100 first
  std::string path;              // the request line's target (for the metrics of a refusal)
  int status = 0;                // kRefused: the answer's status and message
  std::string message;
};

// Frames the request at the start of `bytes`. kComplete once the headers and the whole body are
// in (for a chunked body: the headers).
RequestFrame frame_request(std::string_view bytes, size_t max_header_bytes, size_t max_body_bytes);

}  // namespace tfm::internal::serve
