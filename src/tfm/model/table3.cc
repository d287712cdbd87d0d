#include "tfm/model/table3.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "tfm/core/error.h"

namespace tfm::internal {

namespace {

// Table 3 of the paper, top to bottom (dev perplexity, dev BLEU; params from model/config.cc).
struct PaperRow {
  std::string_view name, group, change;
  double ppl, bleu;
  int64_t steps;
};
constexpr PaperRow kPaperRows[] = {
    {"base", "base", "the base model", 4.92, 25.8, 100000},
    {"A1", "A", "h 1, d_k = d_v 512", 5.29, 24.9, 100000},
    {"A2", "A", "h 4, d_k = d_v 128", 5.00, 25.5, 100000},
    {"A3", "A", "h 16, d_k = d_v 32", 4.91, 25.8, 100000},
    {"A4", "A", "h 32, d_k = d_v 16", 5.01, 25.4, 100000},
    {"B1", "B", "d_k 16", 5.16, 25.1, 100000},
    {"B2", "B", "d_k 32", 5.01, 25.4, 100000},
    {"C1", "C", "N 2", 6.11, 23.7, 100000},
    {"C2", "C", "N 4", 5.19, 25.3, 100000},
    {"C3", "C", "N 8", 4.88, 25.5, 100000},
    {"C4", "C", "d_model 256, d_k = d_v 32", 5.75, 24.5, 100000},
    {"C5", "C", "d_model 1024, d_k = d_v 128", 4.66, 26.0, 100000},
    {"C6", "C", "d_ff 1024", 5.12, 25.4, 100000},
    {"C7", "C", "d_ff 4096", 4.75, 26.2, 100000},
    {"D1", "D", "P_drop 0.0", 5.77, 24.6, 100000},
    {"D2", "D", "P_drop 0.2", 4.95, 25.5, 100000},
    {"D3", "D", "eps_ls 0.0", 4.67, 25.3, 100000},
    {"D4", "D", "eps_ls 0.2", 5.47, 25.7, 100000},
    {"E", "E", "learned positional embedding instead of sinusoids", 4.92, 25.7, 100000},
    {"big", "big", "d_model 1024, d_ff 4096, h 16, P_drop 0.3, 300K steps", 4.33, 26.4, 300000},
};

std::string row_list() {
  std::string names;
  for (const Table3Row& row : table3_rows())
    names += fmt::format("{}{}", names.empty() ? "" : ", ", row.name);
  return names;
}

// a x b / c rounded to the nearest whole number, half up (all positive).
int64_t rounded_ratio(int64_t a, int64_t b, int64_t c) {
  return (2 * a * b + c) / (2 * c);
}

// value x factor_numerator / factor_denominator, which must be a whole number.
int64_t exact_ratio(std::string_view row, std::string_view what, int64_t value, int64_t numerator,
                    int64_t denominator) {
  TFM_CHECK(value * numerator % denominator == 0,
            "Table 3 row {} cannot be scaled to this model: {} {} x {}/{} = {:g} is not a whole "
            "number",
            row, what, value, numerator, denominator,
            static_cast<double>(value * numerator) / static_cast<double>(denominator));
  return value * numerator / denominator;
}

double scaled_probability(std::string_view row, std::string_view what, double value,
                          double row_value, double base_value) {
  const double scaled =
      base_value > 0 ? std::round(value * (row_value / base_value) * 1e6) / 1e6 : row_value;
  TFM_CHECK(scaled < 1.0,
            "Table 3 row {} cannot be scaled to this model: {} {} x {}/{} = {} is not below 1", row,
            what, value, row_value, base_value, scaled);
  return scaled;
}

// Numbers as the table shows them: "0.1", "0", "63.05".
std::string number(double value, int decimals) {
  return fmt::format("{:.{}f}", value, decimals);
}

std::vector<const Table3Result*> in_paper_order(const std::vector<Table3Result>& results) {
  std::vector<const Table3Result*> ordered;
  for (const Table3Row& row : table3_rows())
    for (const Table3Result& result : results)
      if (result.row == row.name) ordered.push_back(&result);
  return ordered;
}

// The cells of one result's line, in table3_columns() order (CSV spelling).
std::vector<std::string> cells(const Table3Result& r, bool markdown) {
  const Table3Row& paper = table3_row(r.row);
  const ModelConfig& c = r.config;
  return {
      r.row,
      std::to_string(c.layers),
      std::to_string(c.d_model),
      std::to_string(c.d_ff),
      std::to_string(c.heads),
      std::to_string(c.d_k),
      std::to_string(c.d_v),
      fmt::format("{:g}", c.dropout),
      fmt::format("{:g}", c.label_smoothing),
      c.positional,
      std::to_string(r.train_steps),
      number(r.train_seconds / 60, markdown ? 1 : 2),
      markdown && r.train_products.empty() ? "?" : r.train_products,
      number(r.perplexity, 2),
      number(r.bleu, 2),
      markdown ? number(static_cast<double>(r.parameters) / 1e6, 2) : std::to_string(r.parameters),
      number(paper.paper_ppl, 2),
      number(paper.paper_bleu, 1),
      paper.paper_params_millions ? std::to_string(*paper.paper_params_millions) : ""};
}

}  // namespace

const std::vector<Table3Row>& table3_rows() {
  static const std::vector<Table3Row> rows = [] {
    std::vector<Table3Row> out;
    for (const PaperRow& p : kPaperRows)
      out.push_back(
          {p.name, p.group, p.change, p.ppl, p.bleu, paper_params_millions(p.name), p.steps});
    return out;
  }();
  return rows;
}

const Table3Row& table3_row(std::string_view name) {
  for (const Table3Row& row : table3_rows())
    if (row.name == name) return row;
  fail("unknown Table 3 row '{}' (rows: {}; groups: A, B, C, D, E)", name, row_list());
}

std::vector<std::string> select_table3_rows(std::string_view selection) {
  std::set<std::string_view> wanted = {"base"};
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(selection.find(',', begin), selection.size());
    std::string_view item = selection.substr(begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    TFM_CHECK(!item.empty(), "--rows '{}': an empty item (rows: {}; groups: A, B, C, D, E; all)",
              selection, row_list());
    bool found = false;
    for (const Table3Row& row : table3_rows())
      if (item == "all" || row.name == item || row.group == item) {
        wanted.insert(row.name);
        found = true;
      }
    TFM_CHECK(found,
              "--rows: unknown Table 3 row or group '{}' (rows: {}; groups: A, B, C, D, E; all)",
              item, row_list());
    if (end == selection.size()) break;
    begin = end + 1;
  }
  std::vector<std::string> rows;
  for (const Table3Row& row : table3_rows())
    if (wanted.count(row.name)) rows.emplace_back(row.name);
  return rows;
}

ModelConfig scaled_row(const ModelConfig& recipe, std::string_view row_name) {
  const std::string_view row = table3_row(row_name).name;
  const ModelConfig base = preset("base");
  const ModelConfig paper = preset(row);
  ModelConfig c = recipe;
  c.layers = std::max<int64_t>(1, rounded_ratio(recipe.layers, paper.layers, base.layers));
  c.d_model = exact_ratio(row, "d_model", recipe.d_model, paper.d_model, base.d_model);
  c.d_ff = exact_ratio(row, "d_ff", recipe.d_ff, paper.d_ff, base.d_ff);
  c.heads = std::max<int64_t>(1, rounded_ratio(recipe.heads, paper.heads, base.heads));
  // The attention widths h x d_k and h x d_v change by the row's factor; the new h divides them.
  const int64_t width_k = exact_ratio(row, "h x d_k", recipe.heads * recipe.d_k,
                                      paper.heads * paper.d_k, base.heads * base.d_k);
  const int64_t width_v = exact_ratio(row, "h x d_v", recipe.heads * recipe.d_v,
                                      paper.heads * paper.d_v, base.heads * base.d_v);
  for (auto [width, field, name] : {std::tuple{width_k, &ModelConfig::d_k, "d_k"},
                                    std::tuple{width_v, &ModelConfig::d_v, "d_v"}}) {
    TFM_CHECK(width % c.heads == 0,
              "Table 3 row {} cannot be scaled to this model: the attention width h x {} = {} "
              "does not divide into {} heads",
              row, name, width, c.heads);
    c.*field = width / c.heads;
  }
  c.dropout = scaled_probability(row, "P_drop", recipe.dropout, paper.dropout, base.dropout);
  c.label_smoothing = scaled_probability(row, "eps_ls", recipe.label_smoothing,
                                         paper.label_smoothing, base.label_smoothing);
  if (paper.positional != base.positional) c.positional = paper.positional;
  try {
    validate(c);
  } catch (const Error& e) {
    fail("Table 3 row {} cannot be scaled to this model: {}", row, e.what());
  }
  return c;
}

std::string train_products_text(const nlohmann::json& steps_by_products) {
  if (!steps_by_products.is_object()) return "";
  std::vector<std::pair<std::string, int64_t>> parts;
  for (const auto& [name, steps] : steps_by_products.items()) {
    if (!steps.is_number_integer()) return "";
    parts.emplace_back(name, steps.get<int64_t>());
  }
  std::sort(parts.begin(), parts.end());
  if (parts.size() == 1) return parts[0].first;
  std::string text;
  for (const auto& [name, steps] : parts)
    text += fmt::format("{}{} {}", text.empty() ? "" : " + ", name, steps);
  return text;
}

nlohmann::ordered_json table3_result_to_json(const Table3Result& r) {
  return {{"row", r.row},
          {"config", config_to_json(r.config)},
          {"parameters", r.parameters},
          {"train_steps", r.train_steps},
          {"train_seconds", r.train_seconds},
          {"train_products", r.train_products},
          {"eval_seconds", r.eval_seconds},
          {"perplexity", r.perplexity},
          {"bleu", r.bleu},
          {"bleu_sentences", r.bleu_sentences},
          {"ppl_tokens", r.ppl_tokens},
          {"averaged", r.averaged}};
}

Table3Result table3_result_from_json(const nlohmann::json& json) {
  TFM_CHECK(json.is_object(), "a sweep result must be a JSON object, got {}", json.type_name());
  auto get = [&json](const char* key) -> const nlohmann::json& {
    TFM_CHECK(json.contains(key), "a sweep result lacks '{}'", key);
    return json.at(key);
  };
  try {
    Table3Result r;
    r.row = get("row").get<std::string>();
    table3_row(r.row);
    r.config = config_from_json(get("config"));
    r.parameters = get("parameters").get<int64_t>();
    r.train_steps = get("train_steps").get<int64_t>();
    r.train_seconds = get("train_seconds").get<double>();
    // Results written before the products were recorded have none.
    r.train_products = json.value("train_products", std::string());
    r.eval_seconds = get("eval_seconds").get<double>();
    r.perplexity = get("perplexity").get<double>();
    r.bleu = get("bleu").get<double>();
    r.bleu_sentences = get("bleu_sentences").get<int64_t>();
    r.ppl_tokens = get("ppl_tokens").get<int64_t>();
    r.averaged = get("averaged").get<std::vector<std::string>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("a sweep result has a value of the wrong type: {}", e.what());
  }
}

const std::vector<std::string>& table3_columns() {
  static const std::vector<std::string> columns = {"row",
                                                   "N",
                                                   "d_model",
                                                   "d_ff",
                                                   "h",
                                                   "d_k",
                                                   "d_v",
                                                   "P_drop",
                                                   "eps_ls",
                                                   "positional",
                                                   "train_steps",
                                                   "train_minutes",
                                                   "train_products",
                                                   "ppl",
                                                   "bleu",
                                                   "params",
                                                   "paper_ppl",
                                                   "paper_bleu",
                                                   "paper_params_millions"};
  return columns;
}

std::string table3_markdown(const std::vector<Table3Result>& results) {
  std::string text =
      "| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls | positions | train steps | "
      "train min | train products | PPL (dev) | BLEU (dev) | params ×10^6 | paper PPL | paper BLEU "
      "| paper params ×10^6 |\n"
      "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|---|--:|--:|--:|--:|--:|--:|\n";
  for (const Table3Result* r : in_paper_order(results)) {
    std::string line = "|";
    for (const std::string& cell : cells(*r, true)) line += " " + cell + " |";
    text += line + "\n";
  }
  return text;
}

std::string table3_csv(const std::vector<Table3Result>& results) {
  std::string text;
  for (const std::string& column : table3_columns()) text += (text.empty() ? "" : ",") + column;
  text += "\n";
  for (const Table3Result* r : in_paper_order(results)) {
    std::string line;
    for (const std::string& cell : cells(*r, false)) line += (line.empty() ? "" : ",") + cell;
    text += line + "\n";
  }
  return text;
}

}  // namespace tfm::internal
