// JSON parsing that refuses a key given twice in one object. nlohmann::json keeps the last of
// repeated keys silently, so a second "__metadata__" in a safetensors header, or a second value of
// a configuration key, would replace the first without a word.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tfm::internal {

// Parses `text`. Throws tfm::Error "<what>: not valid JSON: <reason>" (syntax, or a number beyond
// double such as 1e400) or "<what>: duplicate key \"k\"" (with ` in "parent"` for a key of a nested
// object).
nlohmann::json parse_strict_json(std::string_view text, const std::string& what);
// The same, keeping the keys in the order of the text.
nlohmann::ordered_json parse_strict_ordered_json(std::string_view text, const std::string& what);

}  // namespace tfm::internal
