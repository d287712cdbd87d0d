// One mechanism for the keys of a settings record (ModelConfig's config.json keys, TrainRecipe's
// "section.key" options): a table of rows {name, setter, getter}. Reading sets each given key
// through its row's setter, which parses and checks the value (and names the key in its errors);
// writing emits every row's getter in table order; an unknown key is found as a name with no row,
// and reported with the valid names or the nearest one. A new key is one new row.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfm::internal {

// `Value` is what a reader hands over: a JSON value for config.json, the scalar's text for a
// YAML recipe or a --set option.
template <typename Record, typename Value>
struct KeyRow {
  std::string name;
  std::function<void(Record& record, const std::string& key, const Value& value)> set;
  std::function<nlohmann::ordered_json(const Record& record)> get;  // empty: not written
};

template <typename Record, typename Value>
class KeyTable {
 public:
  using Row = KeyRow<Record, Value>;
  explicit KeyTable(std::vector<Row> rows) : rows_(std::move(rows)) {}

  const std::vector<Row>& rows() const { return rows_; }
  const Row* find(std::string_view name) const {
    for (const Row& row : rows_)
      if (row.name == name) return &row;
    return nullptr;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Row& row : rows_) out.push_back(row.name);
    return out;
  }
  // Sets the key `name` through its row; false (nothing changed) when no row has that name.
  bool set(Record& record, const std::string& name, const Value& value) const {
    const Row* row = find(name);
    if (row == nullptr) return false;
    row->set(record, name, value);
    return true;
  }
  // Every row with a getter, in table order.
  nlohmann::ordered_json to_json(const Record& record) const {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const Row& row : rows_)
      if (row.get) out[row.name] = row.get(record);
    return out;
  }

 private:
  std::vector<Row> rows_;
};

// "a, b, c", for "valid keys: ..." in an unknown key's message.
std::string joined_names(const std::vector<std::string>& names);

// The name nearest to `name` by edit distance when closer than `below` edits (for "did you mean").
std::optional<std::string> nearest_name(const std::vector<std::string>& names,
                                        const std::string& name, size_t below);

}  // namespace tfm::internal
