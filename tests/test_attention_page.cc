// The attention page (viz/attention_page.cc) on a view made by hand: the weights that the page's
// JSON carries are the view's, the JSON cannot end its script element whatever the tokens say, the
// title is escaped, every placeholder is filled and nothing points outside the file. What the page
// draws from it is tested in a browser (tests/browser/attention_page.test.mjs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/viz/assets.h"
#include "tfm/viz/attention_view.h"

namespace tfm::internal::viz {
namespace {

// Softmax rows of seeded random scores; a causal kind's row q covers keys 0..q, with exact zeros
// after them, as the model writes them.
AttentionKind random_kind(const std::string& name, std::vector<std::string> queries,
                          std::vector<std::string> keys, bool causal, std::mt19937& rng) {
  AttentionKind kind{.name = name,
                     .title = name + " attention",
                     .queries = std::move(queries),
                     .keys = std::move(keys),
                     .causal = causal,
                     .layers = 2,
                     .heads = 3,
                     .weights = {}};
  const size_t nq = kind.queries.size(), nk = kind.keys.size();
  std::normal_distribution<float> score(0.0f, 2.0f);
  for (int64_t matrix = 0; matrix < kind.layers * kind.heads; ++matrix) {
    for (size_t q = 0; q < nq; ++q) {
      const size_t seen = causal ? q + 1 : nk;
      std::vector<float> row(nk, 0.0f);
      float sum = 0;
      for (size_t k = 0; k < seen; ++k) sum += row[k] = std::exp(score(rng));
      for (size_t k = 0; k < seen; ++k) row[k] /= sum;
      kind.weights.insert(kind.weights.end(), row.begin(), row.end());
    }
  }
  return kind;
}

AttentionView test_view() {
  std::mt19937 rng(20170612);
  const std::vector<std::string> source = {"▁Ein", "▁\"", "Hund", "▁&", "▁<b>", "</s>"};
  const std::vector<std::string> target = {"<s>", "▁A", "▁\"dog\"", "▁&", "</script>"};
  AttentionView view;
  view.title = "model: <b>\"runs/x\" & 'y'</b>";
  view.source = "Ein \"Hund\" & <b>";
  view.target = "A \"dog\" & </script>";
  view.kinds.push_back(random_kind("encoder", source, source, false, rng));
  view.kinds.push_back(random_kind("decoder", target, target, true, rng));
  view.kinds.push_back(random_kind("cross", target, source, false, rng));
  return view;
}

const std::string kDataOpen = R"(<script type="application/json" id="tfm-data">)";

// The text of the page's data element, as the browser's HTML parser would cut it: up to the first
// "</script" (any case), whatever it is inside.
std::string data_text(const std::string& page) {
  const size_t open = page.find(kDataOpen);
  EXPECT_NE(open, std::string::npos);
  if (open == std::string::npos) return "";
  const size_t begin = open + kDataOpen.size();
  std::string lower = page.substr(begin);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return page.substr(begin, lower.find("</script"));
}

TEST(AttentionPage, TheEmbeddedDataCarriesEveryWeightOfTheView) {
  const AttentionView view = test_view();
  const nlohmann::json data = nlohmann::json::parse(data_text(page_html(view, {})));
  EXPECT_EQ(data["format"], "tfm-attention/1");
  EXPECT_EQ(data["title"], view.title);
  EXPECT_EQ(data["source"], view.source);
  EXPECT_EQ(data["target"], view.target);
  EXPECT_EQ(data["merged_words"], false);
  ASSERT_EQ(data["colors"].size(), 3u);
  for (int64_t head = 0; head < 3; ++head) EXPECT_EQ(data["colors"][head], head_colour(head));
  ASSERT_EQ(data["kinds"].size(), view.kinds.size());
  size_t compared = 0, large = 0;
  for (size_t i = 0; i < view.kinds.size(); ++i) {
    const AttentionKind& kind = view.kinds[i];
    const nlohmann::json& page = data["kinds"][i];
    EXPECT_EQ(page["name"], kind.name);
    EXPECT_EQ(page["title"], kind.title);
    EXPECT_EQ(page["causal"], kind.causal);
    EXPECT_EQ(page["layers"], kind.layers);
    EXPECT_EQ(page["heads"], kind.heads);
    EXPECT_EQ(page["queries"].get<std::vector<std::string>>(), kind.queries);
    EXPECT_EQ(page["keys"].get<std::vector<std::string>>(), kind.keys);
    const auto& weights = page["weights"];
    ASSERT_EQ(weights.size(), static_cast<size_t>(kind.layers));
    for (int64_t l = 0; l < kind.layers; ++l) {
      ASSERT_EQ(weights[l].size(), static_cast<size_t>(kind.heads));
      for (int64_t h = 0; h < kind.heads; ++h) {
        ASSERT_EQ(weights[l][h].size(), kind.queries.size());
        for (size_t q = 0; q < kind.queries.size(); ++q) {
          ASSERT_EQ(weights[l][h][q].size(), kind.keys.size());
          for (size_t k = 0; k < kind.keys.size(); ++k) {
            const float expected = kind.at(l, h, static_cast<int64_t>(q), static_cast<int64_t>(k));
            EXPECT_NEAR(weights[l][h][q][k].get<double>(), expected, 1e-6)
                << kind.name << " layer " << l << " head " << h << " query " << q << " key " << k;
            ++compared;
            large += expected > 0.1f;
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, 2u * 3 * (36 + 25 + 30));
  EXPECT_GT(large, compared / 10);  // the weights compared are real ones, not zeros
}

TEST(AttentionPage, WeightsHaveSixDecimals) {
  AttentionView view;
  view.kinds.push_back({.name = "encoder",
                        .title = "Encoder self-attention",
                        .queries = {"a"},
                        .keys = {"a", "b"},
                        .layers = 1,
                        .heads = 1,
                        .weights = {0.123456789f, 0.876543211f}});
  const nlohmann::json data = page_data(view);
  EXPECT_EQ(data["kinds"][0]["weights"].dump(), "[[[[0.123457,0.876543]]]]");
}

TEST(AttentionPage, TokensCannotEndTheDataScript) {
  const std::string page = page_html(test_view(), {});
  const std::string data = data_text(page);
  // The data element ends where the JSON does: "</s>" and "</script>" inside it are escaped.
  EXPECT_EQ(data.find("</"), std::string::npos);
  EXPECT_EQ(data.find("<!--"), std::string::npos);
  ASSERT_TRUE(data.ends_with("}")) << data.substr(std::max<size_t>(data.size(), 40) - 40);
  const nlohmann::json json = nlohmann::json::parse(data);
  EXPECT_EQ(json["kinds"][0]["keys"][5], "</s>");
  EXPECT_EQ(json["kinds"][1]["keys"][4], "</script>");
  EXPECT_EQ(json["target"], "A \"dog\" & </script>");
}

TEST(AttentionPage, TheTitleIsEscaped) {
  const std::string page = page_html(test_view(), {});
  const std::string escaped = "model: &lt;b&gt;&quot;runs/x&quot; &amp; &#39;y&#39;&lt;/b&gt;";
  EXPECT_NE(page.find("<title>" + escaped), std::string::npos);
  EXPECT_NE(page.find("<h1>" + escaped + "</h1>"), std::string::npos);
  EXPECT_EQ(page.find("<b>\"runs/x\""), std::string::npos);
}

TEST(AttentionPage, EveryPlaceholderIsFilled) {
  const AttentionView view = test_view();
  const std::string page = page_html(view, {});
  EXPECT_EQ(page.find("{{"), std::string::npos);
  EXPECT_NE(std::string(assets::attention_page_html).find("{{TFM_DATA}}"), std::string::npos);
  EXPECT_NE(page.find(assets::attention_page_css), std::string::npos);
  EXPECT_NE(page.find(assets::attention_page_js), std::string::npos);
  EXPECT_NE(page.find(figure_svg(view, resolved({}, view))), std::string::npos);
  EXPECT_TRUE(page.starts_with("<!DOCTYPE html>"));
}

TEST(AttentionPage, TheAssetsCannotEndTheirElements) {
  auto lower = [](std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
  };
  const std::string js = lower(assets::attention_page_js), css = lower(assets::attention_page_css);
  EXPECT_EQ(js.find("</script"), std::string::npos);
  EXPECT_EQ(js.find("<!--"), std::string::npos);
  EXPECT_EQ(js.find("<script"), std::string::npos);
  EXPECT_EQ(css.find("</style"), std::string::npos);
}

TEST(AttentionPage, NothingPointsOutsideTheFile) {
  std::string page = page_html(test_view(), {});
  // XML namespaces are names, never fetched: the SVG's (inline SVG, the figure, the script's
  // createElementNS), XHTML's and XLink's.
  for (const std::string ns : {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xhtml",
                               "http://www.w3.org/1999/xlink"}) {
    for (size_t at; (at = page.find(ns)) != std::string::npos;) page.erase(at, ns.size());
  }
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("//cdn"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);  // no script, image or frame from elsewhere
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  for (size_t at = 0; (at = page.find("url(", at)) != std::string::npos; ++at)
    EXPECT_EQ(page.substr(at, 5), "url(#");  // a fragment of the page only
}

TEST(AttentionPage, AViewWhoseWeightsDoNotFitItsTokensIsAnError) {
  AttentionView view = test_view();
  view.kinds[1].weights.pop_back();
  try {
    page_data(view);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder has 149 weights"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tfm::internal::viz
