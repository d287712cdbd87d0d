// Reading other frameworks' files, shared by the readers (marian.cc, huggingface.cc, tfm_names.cc):
// errors name the file.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace tfm::internal::convert {

// The file's bytes; "<path>: cannot be read (missing?)" when it cannot be opened.
std::string read_bytes(const std::filesystem::path& path);

// The file parsed as JSON; "<path>: not JSON: <the parser's message>" when it is not.
nlohmann::json read_json(const std::filesystem::path& path);
// The same, keeping the keys in the file's order (a configuration written back as read).
nlohmann::ordered_json read_ordered_json(const std::filesystem::path& path);

}  // namespace tfm::internal::convert
