// The paper's Table 3 (section 6.2) as data, and the rule that carries each of its rows over to
// another model: a row is a change of the base model (N 6, d_model 512, d_ff 2048, h 8,
// d_k = d_v 64, P_drop 0.1, eps_ls 0.1, sinusoidal positions), and scaled_row applies the same
// relative change to a recipe's model. `tfm sweep` (docs/TABLE3.md) trains every row so scaled and
// writes the table beside the paper's numbers.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/model/config.h"

namespace tfm::internal {

// One row of Table 3: the preset of the same name (model/config.h) and the paper's dev figures
// (newstest2013, English-German, beam search, no checkpoint averaging).
struct Table3Row {
  std::string_view name;    // "base", "A1".."A4", "B1", "B2", "C1".."C7", "D1".."D4", "E", "big"
  std::string_view group;   // "base", "A".."E", "big"
  std::string_view change;  // the paper's change relative to base, in words
  double paper_ppl = 0;     // per wordpiece
  double paper_bleu = 0;
  std::optional<int> paper_params_millions;  // blank in the paper: as base
  int64_t paper_train_steps = 0;
};

// Every row in the paper's order: base, A1..A4, B1, B2, C1..C7, D1..D4, E, big.
const std::vector<Table3Row>& table3_rows();

// The row of that name; an unknown name is a tfm::Error listing the rows.
const Table3Row& table3_row(std::string_view name);

// The rows a comma-separated selection names, in the paper's order, each once: a row ("A1", "C3",
// "E", "big", "base"), a group letter ("A".."E": its rows) or "all". base is always among them:
// every row is read against it. Empty items and unknown names are errors naming the item.
std::vector<std::string> select_table3_rows(std::string_view selection);

// The recipe's model with Table 3 row `row`'s change applied, scaled to the recipe: every column
// changes by the factor the paper's row changes base's (docs/TABLE3.md):
//   N            round(N x row.N / 6), at least 1 (half rounds up)
//   d_model      d_model x row.d_model / 512    } whole numbers, else an error
//   d_ff         d_ff x row.d_ff / 2048         }
//   h            round(h x row.h / 8), at least 1 (half rounds up)
//   d_k          the attention width h x d_k changes by (row.h x row.d_k) / (8 x 64), and d_k is
//                the new width over the new h (a whole number, else an error); so rows A keep
//                h x d_k, rows B narrow it, C4/C5 and big follow d_model, and where h scales
//                exactly d_k changes by row.d_k / 64
//   d_v          likewise with d_v
//   P_drop       P_drop x row.P_drop / 0.1 (D1: 0; D2: twice; big: three times), to 6 decimals
//   eps_ls       eps_ls x row.eps_ls / 0.1 (D3: 0; D4: twice), to 6 decimals
//   positions    learned for row E; the recipe's otherwise
// Everything else (vocabulary, max_positions, norm, attention dropout...) is the recipe's.
// Scaling base itself gives each row's preset exactly. The result is validated; a value that cannot
// be formed (a fraction, a probability of 1 or more) is a one-line tfm::Error naming the row.
ModelConfig scaled_row(const ModelConfig& recipe_model, std::string_view row);

// One trained row of a sweep: its configuration and what it measured.
struct Table3Result {
  std::string row;
  ModelConfig config;
  int64_t parameters = 0;
  int64_t train_steps = 0;
  double train_seconds = 0;
  // The products the updates ran in, as train_products_text writes them ("f32", "bf16",
  // "bf16 600 + f32 900" for a row resumed on another machine); empty: not recorded.
  std::string train_products;
  double eval_seconds = 0;
  double perplexity = 0;  // dev, per subword, from the unsmoothed cross-entropy
  double bleu = 0;        // dev, beam search, corpus BLEU (sacreBLEU's defaults)
  int64_t bleu_sentences = 0;
  int64_t ppl_tokens = 0;
  std::vector<std::string> averaged;  // the checkpoints averaged (directory names)
};

// The products of a run's updates from its checkpoint's record of steps by products
// (state.json's extra.steps_by_products, e.g. {"bf16": 600, "f32": 900}): the one name, or each
// with its steps, by name; empty for a record that is missing or not such an object.
std::string train_products_text(const nlohmann::json& steps_by_products);

nlohmann::ordered_json table3_result_to_json(const Table3Result& result);
// Errors name the key; the configuration is validated.
Table3Result table3_result_from_json(const nlohmann::json& json);

// The table's columns, as in the CSV header: row, N, d_model, d_ff, h, d_k, d_v, P_drop, eps_ls,
// positional, train_steps, train_minutes, train_products, ppl, bleu, params, then the paper's ppl,
// bleu and params (millions) of the same row.
const std::vector<std::string>& table3_columns();

// The results (any order; written in the paper's order) as a Markdown table and as CSV.
std::string table3_markdown(const std::vector<Table3Result>& results);
std::string table3_csv(const std::vector<Table3Result>& results);

}  // namespace tfm::internal
