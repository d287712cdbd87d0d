// Test helpers for code that touches files: a fresh temporary directory per test, removed
// afterwards, and an expectation that a call throws a one-line tfm::Error containing given
// substrings.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <initializer_list>
#include <string>

#include "tfm/core/error.h"

namespace tfm::internal::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
    path_ = std::filesystem::temp_directory_path() /
            ("tfm_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Runs `call`, which must throw tfm::Error with a one-line message containing every one of `parts`.
template <typename Call>
void expect_error(Call&& call, std::initializer_list<std::string> parts) {
  try {
    call();
    ADD_FAILURE() << "expected a tfm::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << "message \"" << message << "\" lacks \"" << part << "\"";
  }
}

// The message of the tfm::Error that `call` throws ("" when it throws none).
template <typename Call>
std::string error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tfm::internal::testing
