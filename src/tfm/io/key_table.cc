#include "tfm/io/key_table.h"

#include <algorithm>

namespace tfm::internal {

namespace {

// Levenshtein distance, one row at a time.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t next = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = row[j];
      row[j] = next;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::optional<std::string> nearest_name(const std::vector<std::string>& names,
                                        const std::string& name, size_t below) {
  std::optional<std::string> best;
  size_t best_distance = below;
  for (const std::string& candidate : names) {
    const size_t d = edit_distance(candidate, name);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

}  // namespace tfm::internal
