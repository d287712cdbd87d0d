#include "tfm/convert/files.h"

#include <fstream>
#include <iterator>

#include "tfm/core/error.h"

namespace tfm::internal::convert {

namespace fs = std::filesystem;

namespace {

template <typename Json>
Json parse_json(const fs::path& path) {
  try {
    return Json::parse(read_bytes(path));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not JSON: {}", path.string(), one_line(e.what()));
  }
}

}  // namespace

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), "{}: cannot be read (missing?)", path.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

nlohmann::json read_json(const fs::path& path) {
  return parse_json<nlohmann::json>(path);
}

nlohmann::ordered_json read_ordered_json(const fs::path& path) {
  return parse_json<nlohmann::ordered_json>(path);
}

}  // namespace tfm::internal::convert
