// Fuzz target: what tfm serve reads from a client before a model sees it. The input is taken as a
// request body by both JSON shapes (serve/json_api.h: syntax, repeated keys, numbers beyond double,
// types and ranges of every field) and as the first bytes of a connection by the request framing
// (serve/request_framing.h: the header block's end, Content-Length, control characters). A bad
// body must be a RequestError 400; anything else thrown, or a frame that points past the bytes or
// over the limits, is a finding.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "fuzz_util.h"
#include "tfm/serve/json_api.h"
#include "tfm/serve/request_error.h"
#include "tfm/serve/request_framing.h"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}

// A body's parse: accepted, or refused with 400.
template <typename Parse>
void expect_accepted_or_400(Parse&& parse) {
  try {
    parse();
  } catch (const tfm::internal::serve::RequestError& e) {
    if (e.status() != 400 || std::string_view(e.what()).empty())
      finding("a request body refused with another status than 400, or without a message");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: internal error: %s\n", e.what());
    std::abort();
  }
}

void check_frame(std::string_view bytes) {
  constexpr size_t kMaxHeader = 512, kMaxBody = 1024;
  const tfm::internal::serve::RequestFrame frame =
      tfm::internal::serve::frame_request(bytes, kMaxHeader, kMaxBody);
  using State = tfm::internal::serve::RequestFrame::State;
  if (frame.state == State::kRefused) {
    if (frame.status != 400 && frame.status != 411 && frame.status != 413 && frame.status != 431)
      finding("a request refused by its framing with an unexpected status");
    if (frame.message.empty()) finding("a framing refusal without a message");
    return;
  }
  if (frame.state == State::kIncomplete) {
    if (frame.header_bytes == 0 && bytes.size() >= kMaxHeader)
      finding("headers over the limit wait for more bytes");
    return;
  }
  if (frame.header_bytes == 0 || frame.header_bytes > bytes.size() ||
      frame.header_bytes > kMaxHeader)
    finding("a complete frame whose headers end outside the bytes or over the limit");
  if (frame.body_bytes > kMaxBody) finding("a complete frame with a body over the limit");
  if (!frame.chunked && frame.header_bytes + frame.body_bytes > bytes.size())
    finding("a complete frame whose body is not all there");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  expect_accepted_or_400([&] { (void)tfm::internal::serve::parse_libretranslate(input); });
  expect_accepted_or_400([&] { (void)tfm::internal::serve::parse_opennmt(input); });
  check_frame(input);
  return 0;
}
