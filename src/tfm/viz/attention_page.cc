// The attention page: page_data() (the JSON the page's JavaScript reads) and page_html() (the
// template of viz/assets with the CSS, the JavaScript, the data and the figure put in).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "tfm/core/error.h"
#include "tfm/viz/assets.h"
#include "tfm/viz/attention_view.h"
#include "tfm/viz/markup.h"

namespace tfm::internal::viz {
namespace {

// A weight with 6 decimals: |written - w| <= 5e-7, and a page a third the size of full floats.
double six_decimals(float w) {
  return std::round(static_cast<double>(w) * 1e6) / 1e6;
}

nlohmann::json kind_data(const AttentionKind& kind) {
  const auto nq = static_cast<int64_t>(kind.queries.size());
  const auto nk = static_cast<int64_t>(kind.keys.size());
  TFM_CHECK(kind.layers >= 0 && kind.heads >= 0 &&
                kind.weights.size() == static_cast<size_t>(kind.layers * kind.heads * nq * nk),
            "attention page: {} has {} weights, not layers x heads x queries x keys = "
            "{} x {} x {} x {}",
            kind.name, kind.weights.size(), kind.layers, kind.heads, nq, nk);
  auto layers = nlohmann::json::array();
  for (int64_t layer = 0; layer < kind.layers; ++layer) {
    auto heads = nlohmann::json::array();
    for (int64_t head = 0; head < kind.heads; ++head) {
      auto rows = nlohmann::json::array();
      for (int64_t q = 0; q < nq; ++q) {
        auto row = nlohmann::json::array();
        for (int64_t k = 0; k < nk; ++k) row.push_back(six_decimals(kind.at(layer, head, q, k)));
        rows.push_back(std::move(row));
      }
      heads.push_back(std::move(rows));
    }
    layers.push_back(std::move(heads));
  }
  return {{"name", kind.name},     {"title", kind.title},         {"causal", kind.causal},
          {"layers", kind.layers}, {"heads", kind.heads},         {"queries", kind.queries},
          {"keys", kind.keys},     {"weights", std::move(layers)}};
}

// The data as the text of a <script type="application/json">: nothing in it may end the script or
// start an HTML comment there ("</s>", "<!--" in a token), so every '<' becomes the JSON escape
// \u003c (legal only inside strings, where JSON.parse reads it back as '<'). Token text that is not
// UTF-8 is written with U+FFFD instead of failing the page.
std::string script_json(const nlohmann::json& data) {
  const std::string text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

// The SVG document inline in the HTML: an XML declaration there would be a bogus comment.
std::string inline_svg(std::string svg) {
  if (svg.starts_with("<?xml")) {
    const size_t end = svg.find("?>");
    svg.erase(0, end == std::string::npos ? svg.size() : end + 2);
  }
  return svg;
}

// The template with each {{TFM_NAME}} replaced, in one pass: a value is never searched for
// placeholders, so the CSS, the script or a token cannot be mistaken for one.
std::string substituted(const std::string& text, const std::map<std::string, std::string>& values) {
  std::string out;
  size_t at = 0;
  for (size_t open; (open = text.find("{{TFM_", at)) != std::string::npos;) {
    const size_t close = text.find("}}", open);
    TFM_CHECK(close != std::string::npos, "attention page: unclosed placeholder in the template");
    const std::string name = text.substr(open + 2, close - open - 2);
    const auto value = values.find(name);
    TFM_CHECK(value != values.end(), "attention page: unknown placeholder {{{{{}}}}}", name);
    out.append(text, at, open - at);
    out += value->second;
    at = close + 2;
  }
  out.append(text, at);
  return out;
}

}  // namespace

nlohmann::json page_data(const AttentionView& view) {
  int64_t heads = 0;
  auto kinds = nlohmann::json::array();
  for (const AttentionKind& kind : view.kinds) {
    heads = std::max(heads, kind.heads);
    kinds.push_back(kind_data(kind));
  }
  auto colours = nlohmann::json::array();
  for (int64_t head = 0; head < heads; ++head) colours.push_back(head_colour(head));
  return {{"format", "tfm-attention/1"},
          {"title", view.title},
          {"source", view.source},
          {"target", view.target},
          {"merged_words", view.merged_words},
          {"colors", std::move(colours)},
          {"kinds", std::move(kinds)}};
}

std::string page_html(const AttentionView& view, const FigureOptions& figure) {
  const std::string svg = inline_svg(figure_svg(view, resolved(figure, view)));
  return substituted(assets::attention_page_html, {{"TFM_TITLE", markup_escaped(view.title)},
                                                   {"TFM_CSS", assets::attention_page_css},
                                                   {"TFM_JS", assets::attention_page_js},
                                                   {"TFM_DATA", script_json(page_data(view))},
                                                   {"TFM_FIGURE", svg}});
}

std::string markup_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace tfm::internal::viz
