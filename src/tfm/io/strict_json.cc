#include "tfm/io/strict_json.h"

#include <set>
#include <vector>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {

// One open object or array while parsing: the keys seen so far and the last of them (the name of
// a nested object that starts after it).
struct Level {
  bool object = false;
  std::set<std::string> keys;
  std::string last_key;
};

// The key under which the innermost object sits, or "" at the top.
std::string parent_key(const std::vector<Level>& levels) {
  for (size_t i = levels.size() - 1; i-- > 0;)
    if (levels[i].object) return levels[i].last_key;
  return "";
}

template <typename Json>
Json parse_strict(std::string_view text, const std::string& what) {
  std::vector<Level> levels;
  auto refuse_repeated_keys = [&](int, typename Json::parse_event_t event, Json& parsed) {
    using Event = typename Json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start)
      levels.push_back({event == Event::object_start, {}, {}});
    if (event == Event::object_end || event == Event::array_end) levels.pop_back();
    if (event == Event::key) {
      const std::string key = parsed.template get<std::string>();
      if (!levels.back().keys.insert(key).second) {
        const std::string parent = parent_key(levels);
        fail("{}: duplicate key \"{}\"{}", what, key,
             parent.empty() ? "" : fmt::format(" in \"{}\"", parent));
      }
      levels.back().last_key = key;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), refuse_repeated_keys);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number beyond double (1e400).
    fail("{}: not valid JSON: {}", what, e.what());
  }
}

}  // namespace

nlohmann::json parse_strict_json(std::string_view text, const std::string& what) {
  return parse_strict<nlohmann::json>(text, what);
}

nlohmann::ordered_json parse_strict_ordered_json(std::string_view text, const std::string& what) {
  return parse_strict<nlohmann::ordered_json>(text, what);
}

}  // namespace tfm::internal
