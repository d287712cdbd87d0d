// Table 3's rows carried over to another model (model/table3.h): hand-checked configurations for
// the Multi30k recipe, base scaled to itself giving the paper's rows, refusals, the row selection,
// and the sweep table's columns.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "build_paths.h"
#include "temp_dir.h"
#include "tfm/model/parameters.h"
#include "tfm/model/table3.h"
#include "tfm/train/recipe.h"

namespace tfm::internal {
namespace {

using testing::expect_error;
using testing::TempDir;

// configs/multi30k-en-de-paper.yaml's model with its 8000-piece vocabulary.
ModelConfig multi30k_model() {
  TempDir dir;
  const std::string data = dir.path().string();
  ::setenv("TFM_DATA_DIR", data.c_str(), 1);
  const TrainRecipe recipe = load_recipe(std::filesystem::path(tfm_source_dir()) / "configs" /
                                         "multi30k-en-de-paper.yaml");
  ::unsetenv("TFM_DATA_DIR");
  return recipe.model_config(recipe.vocab_size);
}

struct Columns {
  int64_t layers, d_model, d_ff, heads, d_k, d_v;
  double dropout, label_smoothing;
  std::string positional;
};

void expect_columns(const ModelConfig& c, const Columns& want, const std::string& row) {
  SCOPED_TRACE(row);
  EXPECT_EQ(c.layers, want.layers);
  EXPECT_EQ(c.d_model, want.d_model);
  EXPECT_EQ(c.d_ff, want.d_ff);
  EXPECT_EQ(c.heads, want.heads);
  EXPECT_EQ(c.d_k, want.d_k);
  EXPECT_EQ(c.d_v, want.d_v);
  EXPECT_EQ(c.dropout, want.dropout);  // exactly: the scaled value is rounded to 6 decimals
  EXPECT_EQ(c.label_smoothing, want.label_smoothing);
  EXPECT_EQ(c.positional, want.positional);
}

TEST(Table3, RowsInThePapersOrderWithItsNumbers) {
  std::vector<std::string> names;
  for (const Table3Row& row : table3_rows()) names.emplace_back(row.name);
  EXPECT_EQ(names, (std::vector<std::string>{"base", "A1", "A2", "A3", "A4", "B1", "B2",
                                             "C1",   "C2", "C3", "C4", "C5", "C6", "C7",
                                             "D1",   "D2", "D3", "D4", "E",  "big"}));
  EXPECT_EQ(names, preset_names());
  EXPECT_DOUBLE_EQ(table3_row("base").paper_ppl, 4.92);
  EXPECT_DOUBLE_EQ(table3_row("base").paper_bleu, 25.8);
  EXPECT_EQ(table3_row("base").paper_params_millions, 65);
  EXPECT_DOUBLE_EQ(table3_row("A1").paper_bleu, 24.9);
  EXPECT_FALSE(table3_row("A1").paper_params_millions.has_value());
  EXPECT_DOUBLE_EQ(table3_row("C1").paper_ppl, 6.11);
  EXPECT_EQ(table3_row("C5").paper_params_millions, 168);
  EXPECT_DOUBLE_EQ(table3_row("D3").paper_ppl, 4.67);
  EXPECT_DOUBLE_EQ(table3_row("big").paper_ppl, 4.33);
  EXPECT_EQ(table3_row("big").paper_train_steps, 300000);
  EXPECT_EQ(table3_row("E").group, "E");
  expect_error([] { table3_row("F1"); }, {"unknown Table 3 row 'F1'", "base, A1"});
}

// Scaling base by a row's change gives the row itself: the presets are the paper's rows.
TEST(Table3, ScalingBaseGivesThePapersRows) {
  const ModelConfig base = preset("base");
  for (const Table3Row& row : table3_rows()) {
    const ModelConfig scaled = scaled_row(base, row.name);
    EXPECT_EQ(scaled, preset(row.name)) << row.name;
    ModelConfig paper_vocab = scaled;
    paper_vocab.vocab_size = 37000;
    EXPECT_EQ(parameter_count(paper_vocab), parameter_count([&] {
                ModelConfig p = preset(row.name);
                p.vocab_size = 37000;
                return p;
              }()))
        << row.name;
  }
  // Hand-checked columns of a few (Table 3).
  expect_columns(scaled_row(base, "A1"), {6, 512, 2048, 1, 512, 512, 0.1, 0.1, "sinusoidal"}, "A1");
  expect_columns(scaled_row(base, "B1"), {6, 512, 2048, 8, 16, 64, 0.1, 0.1, "sinusoidal"}, "B1");
  expect_columns(scaled_row(base, "C4"), {6, 256, 2048, 8, 32, 32, 0.1, 0.1, "sinusoidal"}, "C4");
  expect_columns(scaled_row(base, "big"), {6, 1024, 4096, 16, 64, 64, 0.3, 0.1, "sinusoidal"},
                 "big");
  expect_columns(scaled_row(base, "D3"), {6, 512, 2048, 8, 64, 64, 0.1, 0.0, "sinusoidal"}, "D3");
  // Parameter counts with a 37000-piece vocabulary (docs/PARAMETERS.md; the paper's column is
  // 65, 58, 36, 213: its exact vocabulary is unknown).
  auto count = [](ModelConfig c) {
    c.vocab_size = 37000;
    return parameter_count(c);
  };
  EXPECT_EQ(count(scaled_row(base, "base")), 63045632);
  EXPECT_EQ(count(scaled_row(base, "B1")), 55967744);
  EXPECT_EQ(count(scaled_row(base, "C1")), 33644544);
  EXPECT_EQ(count(scaled_row(base, "big")), 214171648);
}

// configs/multi30k-en-de-paper.yaml: N 3, d_model 256, d_ff 1024, h 4, d_k = d_v 64, P_drop 0.2,
// eps_ls 0.1, every row worked out by hand from the rule of model/table3.h.
TEST(Table3, EveryRowOfTheMulti30kRecipe) {
  const ModelConfig m = multi30k_model();
  expect_columns(m, {3, 256, 1024, 4, 64, 64, 0.2, 0.1, "sinusoidal"}, "recipe");
  const std::vector<std::pair<std::string, Columns>> want = {
      {"base", {3, 256, 1024, 4, 64, 64, 0.2, 0.1, "sinusoidal"}},
      // h x 1/8 = 0.5 rounds to 1 head; h x d_k stays 256.
      {"A1", {3, 256, 1024, 1, 256, 256, 0.2, 0.1, "sinusoidal"}},
      {"A2", {3, 256, 1024, 2, 128, 128, 0.2, 0.1, "sinusoidal"}},
      {"A3", {3, 256, 1024, 8, 32, 32, 0.2, 0.1, "sinusoidal"}},
      {"A4", {3, 256, 1024, 16, 16, 16, 0.2, 0.1, "sinusoidal"}},
      {"B1", {3, 256, 1024, 4, 16, 64, 0.2, 0.1, "sinusoidal"}},
      {"B2", {3, 256, 1024, 4, 32, 64, 0.2, 0.1, "sinusoidal"}},
      // N x 2/6, 4/6, 8/6 of 3 layers: 1, 2, 4.
      {"C1", {1, 256, 1024, 4, 64, 64, 0.2, 0.1, "sinusoidal"}},
      {"C2", {2, 256, 1024, 4, 64, 64, 0.2, 0.1, "sinusoidal"}},
      {"C3", {4, 256, 1024, 4, 64, 64, 0.2, 0.1, "sinusoidal"}},
      {"C4", {3, 128, 1024, 4, 32, 32, 0.2, 0.1, "sinusoidal"}},
      {"C5", {3, 512, 1024, 4, 128, 128, 0.2, 0.1, "sinusoidal"}},
      {"C6", {3, 256, 512, 4, 64, 64, 0.2, 0.1, "sinusoidal"}},
      {"C7", {3, 256, 2048, 4, 64, 64, 0.2, 0.1, "sinusoidal"}},
      {"D1", {3, 256, 1024, 4, 64, 64, 0.0, 0.1, "sinusoidal"}},
      {"D2", {3, 256, 1024, 4, 64, 64, 0.4, 0.1, "sinusoidal"}},
      {"D3", {3, 256, 1024, 4, 64, 64, 0.2, 0.0, "sinusoidal"}},
      {"D4", {3, 256, 1024, 4, 64, 64, 0.2, 0.2, "sinusoidal"}},
      {"E", {3, 256, 1024, 4, 64, 64, 0.2, 0.1, "learned"}},
      {"big", {3, 512, 2048, 8, 64, 64, 0.6, 0.1, "sinusoidal"}},
  };
  ASSERT_EQ(want.size(), table3_rows().size());
  for (const auto& [row, columns] : want) {
    const ModelConfig c = scaled_row(m, row);
    expect_columns(c, columns, row);
    // What the rows leave alone is the recipe's.
    EXPECT_EQ(c.vocab_size, 8000);
    EXPECT_EQ(c.max_positions, 256);
    EXPECT_EQ(c.norm, m.norm);
  }
  // Parameters, by the closed form of docs/MODEL_FORMAT.md (shared 8000 x d_model embedding; per
  // encoder layer 4 d_model x h d_k projections, the feed-forward with biases, 2 LayerNorms; per
  // decoder layer twice the projections and 3 LayerNorms).
  EXPECT_EQ(parameter_count(scaled_row(m, "base")), 7568384);
  EXPECT_EQ(parameter_count(scaled_row(m, "A1")), 7568384);  // h x d_k unchanged
  // B1: W_Q and W_K 256 x 16 x 4 instead of 256 x 256 in 9 attentions: 9 x 2 x 49152 fewer.
  EXPECT_EQ(parameter_count(scaled_row(m, "B1")), 7568384 - 9 * 2 * 49152);
  EXPECT_EQ(parameter_count(scaled_row(m, "C1")), 2048000 + 788736 + 1051392);
  EXPECT_EQ(parameter_count(scaled_row(m, "E")), 7568384 + 2 * 256 * 256);  // two position tables
  EXPECT_EQ(parameter_count(scaled_row(m, "big")), 26146816);
}

TEST(Table3, HeadsRoundAndTheAttentionWidthIsKept) {
  ModelConfig c = preset("base");
  c.heads = 3;  // h x d_k = 192
  expect_columns(scaled_row(c, "A1"), {6, 512, 2048, 1, 192, 192, 0.1, 0.1, "sinusoidal"}, "A1");
  expect_columns(scaled_row(c, "A2"), {6, 512, 2048, 2, 96, 96, 0.1, 0.1, "sinusoidal"}, "A2");
  expect_columns(scaled_row(c, "A4"), {6, 512, 2048, 12, 16, 16, 0.1, 0.1, "sinusoidal"}, "A4");
  expect_columns(scaled_row(c, "B1"), {6, 512, 2048, 3, 16, 64, 0.1, 0.1, "sinusoidal"}, "B1");
  c.layers = 1;  // 1 x 2/6 rounds to 0: at least 1 layer
  EXPECT_EQ(scaled_row(c, "C1").layers, 1);
  EXPECT_EQ(scaled_row(c, "C3").layers, 1);  // 1 x 8/6 = 1.33
  c.layers = 9;
  EXPECT_EQ(scaled_row(c, "C1").layers, 3);
  EXPECT_EQ(scaled_row(c, "C2").layers, 6);
  EXPECT_EQ(scaled_row(c, "C3").layers, 12);
  c.layers = 3;
  c.dropout = 0.0;  // no dropout: D2 and big have none to multiply
  EXPECT_EQ(scaled_row(c, "D2").dropout, 0.0);
  EXPECT_EQ(scaled_row(c, "big").dropout, 0.0);
  c.dropout = 0.15;
  EXPECT_EQ(scaled_row(c, "D2").dropout, 0.3);
  EXPECT_EQ(scaled_row(c, "big").dropout, 0.45);
}

TEST(Table3, ValuesThatCannotBeFormedAreRefused) {
  ModelConfig c = preset("base");
  c.d_ff = 1001;
  expect_error([&] { scaled_row(c, "C6"); },
               {"Table 3 row C6 cannot be scaled", "d_ff 1001 x 1024/2048 = 500.5"});
  c = preset("base");
  c.heads = 5;  // A2: 2.5 rounds to 3 heads, which do not divide h x d_k = 320
  expect_error([&] { scaled_row(c, "A2"); },
               {"Table 3 row A2", "h x d_k = 320 does not divide into 3 heads"});
  c = preset("base");
  c.d_model = 254;  // C4: 127, odd, which sinusoids cannot fill
  expect_error([&] { scaled_row(c, "C4"); }, {"Table 3 row C4", "'d_model' must be even"});
  c = preset("base");
  c.dropout = 0.4;  // big: 1.2
  expect_error([&] { scaled_row(c, "big"); }, {"Table 3 row big", "P_drop 0.4", "not below 1"});
  expect_error([&] { scaled_row(preset("base"), "A5"); }, {"unknown Table 3 row 'A5'"});
}

TEST(Table3, RowSelection) {
  using Rows = std::vector<std::string>;
  EXPECT_EQ(select_table3_rows("A"), (Rows{"base", "A1", "A2", "A3", "A4"}));
  EXPECT_EQ(select_table3_rows("C3, A1"), (Rows{"base", "A1", "C3"}));  // the paper's order
  EXPECT_EQ(select_table3_rows("E,big,base,E"), (Rows{"base", "E", "big"}));
  EXPECT_EQ(select_table3_rows("B,D"), (Rows{"base", "B1", "B2", "D1", "D2", "D3", "D4"}));
  EXPECT_EQ(select_table3_rows("all").size(), 20u);
  EXPECT_EQ(select_table3_rows("A,B,C,D,E,big").size(), 20u);
  expect_error([] { select_table3_rows("A,,B"); }, {"an empty item"});
  expect_error([] { select_table3_rows(""); }, {"an empty item"});
  expect_error([] { select_table3_rows("A,F"); }, {"unknown Table 3 row or group 'F'"});
  expect_error([] { select_table3_rows("a1"); }, {"'a1'"});
}

Table3Result result_of(const std::string& row, double ppl, double bleu) {
  Table3Result r;
  r.row = row;
  r.config = scaled_row(preset("base"), row);
  r.parameters = parameter_count(r.config);
  r.train_steps = 1200;
  r.train_seconds = 480;
  r.train_products = "bf16";
  r.eval_seconds = 20;
  r.perplexity = ppl;
  r.bleu = bleu;
  r.bleu_sentences = 1014;
  r.ppl_tokens = 15000;
  r.averaged = {"step-000001100", "step-000001200"};
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Table3, TheTablesColumnsAndRowsInThePapersOrder) {
  const std::vector<Table3Result> results = {result_of("E", 5.5, 30.25),
                                             result_of("base", 5.25, 31.5)};
  EXPECT_EQ(table3_columns(),
            (std::vector<std::string>{"row", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop",
                                      "eps_ls", "positional", "train_steps", "train_minutes",
                                      "train_products", "ppl", "bleu", "params", "paper_ppl",
                                      "paper_bleu", "paper_params_millions"}));
  const std::vector<std::string> csv = lines_of(table3_csv(results));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[0],
            "row,N,d_model,d_ff,h,d_k,d_v,P_drop,eps_ls,positional,train_steps,train_minutes,"
            "train_products,ppl,bleu,params,paper_ppl,paper_bleu,paper_params_millions");
  EXPECT_EQ(
      csv[1],
      "base,6,512,2048,8,64,64,0.1,0.1,sinusoidal,1200,8.00,bf16,5.25,31.50,63045632,4.92,25.8,65");
  EXPECT_EQ(csv[2],
            "E,6,512,2048,8,64,64,0.1,0.1,learned,1200,8.00,bf16,5.50,30.25,64094208,4.92,25.7,");
  const std::vector<std::string> md = lines_of(table3_markdown(results));
  ASSERT_EQ(md.size(), 4u);
  EXPECT_NE(md[0].find("| row | N | d_model | d_ff | h | d_k | d_v | P_drop | eps_ls |"),
            std::string::npos);
  EXPECT_NE(md[0].find("| PPL (dev) | BLEU (dev) | params ×10^6 | paper PPL | paper BLEU |"),
            std::string::npos);
  EXPECT_EQ(md[2],
            "| base | 6 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | sinusoidal | 1200 | 8.0 | bf16 | "
            "5.25 | 31.50 | 63.05 | 4.92 | 25.8 | 65 |");
  EXPECT_EQ(md[3].substr(0, 6), "| E | ");
  // Every line has one cell per column.
  for (const std::string& line : md)
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 20) << line;
  // A result from before the products were recorded shows "?" (Markdown) or nothing (CSV).
  Table3Result unrecorded = result_of("C1", 6.0, 29.0);
  unrecorded.train_products.clear();
  EXPECT_NE(table3_markdown({unrecorded}).find("| 1200 | 8.0 | ? | 6.00 |"), std::string::npos);
  EXPECT_NE(table3_csv({unrecorded}).find(",1200,8.00,,6.00,"), std::string::npos);
}

TEST(Table3, TrainProductsText) {
  EXPECT_EQ(train_products_text(nlohmann::json({{"f32", 1500}})), "f32");
  EXPECT_EQ(train_products_text(nlohmann::json({{"f32", 900}, {"bf16", 600}})),
            "bf16 600 + f32 900");
  EXPECT_EQ(train_products_text(nlohmann::json({{"unrecorded", 75}, {"f32", 1425}})),
            "f32 1425 + unrecorded 75");
  EXPECT_EQ(train_products_text(nlohmann::json()), "");
  EXPECT_EQ(train_products_text(nlohmann::json({{"f32", "many"}})), "");
  EXPECT_EQ(train_products_text(nlohmann::json::array({1, 2})), "");
}

TEST(Table3, ResultsRoundTripThroughJson) {
  const Table3Result r = result_of("C3", 4.5, 33.0);
  const Table3Result back =
      table3_result_from_json(nlohmann::json::parse(table3_result_to_json(r).dump()));
  EXPECT_EQ(back.row, "C3");
  EXPECT_EQ(back.config, r.config);
  EXPECT_EQ(back.parameters, r.parameters);
  EXPECT_EQ(back.train_steps, 1200);
  EXPECT_EQ(back.perplexity, 4.5);
  EXPECT_EQ(back.bleu, 33.0);
  EXPECT_EQ(back.averaged, r.averaged);
  EXPECT_EQ(back.train_products, "bf16");
  nlohmann::json older = nlohmann::json::parse(table3_result_to_json(r).dump());
  older.erase("train_products");  // written before the products were recorded
  EXPECT_EQ(table3_result_from_json(older).train_products, "");
  nlohmann::json broken = nlohmann::json::parse(table3_result_to_json(r).dump());
  broken.erase("bleu");
  expect_error([&] { table3_result_from_json(broken); }, {"lacks 'bleu'"});
  broken = nlohmann::json::parse(table3_result_to_json(r).dump());
  broken["row"] = "Z9";
  expect_error([&] { table3_result_from_json(broken); }, {"unknown Table 3 row 'Z9'"});
}

}  // namespace
}  // namespace tfm::internal
