// An error that a request caused or met, with the HTTP status it answers with: what the server
// says to a client is always one of these (400 bad input, 401, 404, 413, 503 with Retry-After,
// 504), never a crash and never an unexplained 500.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace tfm::internal::serve {

class RequestError : public std::runtime_error {
 public:
  RequestError(int status, std::string message, int retry_after_seconds = 0)
      : std::runtime_error(std::move(message)),
        status_(status),
        retry_after_seconds_(retry_after_seconds) {}

  int status() const { return status_; }
  int retry_after_seconds() const { return retry_after_seconds_; }  // > 0: a Retry-After header
  RequestError& with_retry_after(int seconds) {
    retry_after_seconds_ = seconds;
    return *this;
  }

 private:
  int status_;
  int retry_after_seconds_;
};

// A RequestError with a {fmt} message.
template <typename... Args>
RequestError request_error(int status, fmt::format_string<Args...> format, Args&&... args) {
  return RequestError(status, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace tfm::internal::serve
