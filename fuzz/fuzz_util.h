// Shared by the fuzz targets (docs/RELIABILITY.md): a per-process scratch directory for the input
// files, the split of one input into several files, the tiny model of the seeds, and the rule every
// target checks: a defect in a file is a one-line tfm::Error; any other exception ("internal error"
// in the CLI) or a multi-line message aborts, so that libFuzzer records the input as a finding.
#pragma once

#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/core/tensor.h"
#include "tfm/model/config.h"
#include "tfm/model/parameters.h"

namespace tfm::internal::fuzz {

// /dev/shm/tfm-fuzz-<pid> (memory, not disk), or the system temp folder; removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path base = "/dev/shm";
    std::error_code ec;
    if (!std::filesystem::is_directory(base, ec)) base = std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("tfm-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_dir(), ignored);
    });
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// Splits an input into two files' contents: the first 2 bytes (little-endian) give the length of
// the first part (cut to what is there), the rest is the second part. fuzz/make_seeds.sh packs the
// seeds the same way.
inline std::pair<std::string_view, std::string_view> split2(const uint8_t* data, size_t size) {
  if (size < 2) return {{}, {}};
  size_t first = static_cast<size_t>(data[0]) | (static_cast<size_t>(data[1]) << 8);
  const char* p = reinterpret_cast<const char*>(data) + 2;
  size -= 2;
  if (first > size) first = size;
  return {{p, first}, {p + first, size - first}};
}

// TFM_FUZZ_TOLERATE="text|text...": exceptions whose message contains one of these are taken as
// expected, to look past a known finding until it is fixed (never set by scripts/fuzz.sh).
inline bool tolerated(std::string_view message) {
  static const std::vector<std::string> known = [] {
    std::vector<std::string> out;
    const char* env = std::getenv("TFM_FUZZ_TOLERATE");
    std::string_view rest = env ? env : "";
    while (!rest.empty()) {
      size_t bar = rest.find('|');
      if (bar != 0) out.emplace_back(rest.substr(0, bar));
      rest = bar == std::string_view::npos ? "" : rest.substr(bar + 1);
    }
    return out;
  }();
  for (const std::string& k : known)
    if (message.find(k) != std::string_view::npos) return true;
  return false;
}

// Runs the code under test: tfm::Error with a one-line message is the expected outcome of a bad
// file; anything else is a finding.
template <typename Fn>
void expect_only_tfm_errors(Fn&& fn) {
  try {
    fn();
  } catch (const tfm::Error& e) {
    std::string_view message = e.what();
    if ((message.empty() || message.find_first_of("\r\n") != std::string_view::npos) &&
        !tolerated(message)) {
      std::fprintf(stderr, "fuzz: tfm::Error message is not one line: [%s]\n", e.what());
      std::abort();
    }
  } catch (const std::exception& e) {
    if (tolerated(e.what())) return;
    int status = 0;
    char* type = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    std::fprintf(stderr, "fuzz: internal error: uncaught %s: %s\n", type ? type : typeid(e).name(),
                 e.what());
    std::abort();
  }
  // Anything else (not a std::exception) leaves the function: std::terminate, also a finding.
}

// The tiny model of the seeds and of fuzz_checkpoint's fixed model directory: every parameter kind
// (post-norm, sinusoidal) in a few hundred floats.
inline ModelConfig tiny_config() {
  ModelConfig c;
  c.layers = 1;
  c.d_model = 8;
  c.d_ff = 8;
  c.heads = 2;
  c.d_k = 4;
  c.d_v = 4;
  c.dropout = 0.0;
  c.max_positions = 16;
  c.vocab_size = 8;
  return c;
}

// Deterministic small values, parameter order and shapes from parameter_specs.
inline std::vector<std::pair<std::string, Tensor>> tiny_parameters(const ModelConfig& config,
                                                                   float scale = 0.01f) {
  std::vector<std::pair<std::string, Tensor>> out;
  int64_t k = 0;
  for (const ParameterSpec& spec : parameter_specs(config)) {
    std::vector<float> values(static_cast<size_t>(spec.shape.numel()));
    for (float& v : values) v = scale * static_cast<float>((k++ % 13) - 6);
    out.emplace_back(spec.name, Tensor::from_floats(spec.shape, values));
  }
  return out;
}

}  // namespace tfm::internal::fuzz
