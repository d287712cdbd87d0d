// The paper's figures 3-5 as SVG (viz::figure_svg) over a hand-made attention view: the lines drawn
// (how many, their weights and colours), the document's well-formedness and escaping, the options'
// defaults and every error.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "tfm/viz/attention_view.h"

namespace tfm::internal::viz {
namespace {

using testing::error_of;
using testing::expect_error;

constexpr int64_t kLayers = 3, kHeads = 4;

// Softmax rows of random logits (seeded), zero above the diagonal for a causal kind.
AttentionKind random_kind(std::string name, std::vector<std::string> queries,
                          std::vector<std::string> keys, bool causal, uint32_t seed) {
  AttentionKind kind;
  kind.name = name;
  kind.title = name + " attention";
  kind.queries = std::move(queries);
  kind.keys = std::move(keys);
  kind.causal = causal;
  kind.layers = kLayers;
  kind.heads = kHeads;
  const auto nq = static_cast<int64_t>(kind.queries.size());
  const auto nk = static_cast<int64_t>(kind.keys.size());
  std::mt19937 rng(seed);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  kind.weights.assign(static_cast<size_t>(kLayers * kHeads * nq * nk), 0.0f);
  for (int64_t row = 0; row < kLayers * kHeads * nq; ++row) {
    const int64_t q = row % nq;
    const int64_t seen = causal ? q + 1 : nk;
    float* w = &kind.weights[static_cast<size_t>(row * nk)];
    float sum = 0;
    for (int64_t k = 0; k < seen; ++k) sum += (w[k] = std::exp(logit(rng)));
    for (int64_t k = 0; k < seen; ++k) w[k] /= sum;
  }
  return kind;
}

const std::vector<std::string> kSource = {"<s>",        "\u2581Tom", "\u2581&", "\u2581\"Jerry\"",
                                          "\u2581it's", "</s>"};
const std::vector<std::string> kTarget = {"<s>", "\u2581Tom", "\u2581und", "\u2581Jerry", "</s>"};

AttentionView test_view() {
  AttentionView view;
  view.title = "model: test";
  view.kinds.push_back(random_kind("encoder", kSource, kSource, false, 1));
  view.kinds.push_back(random_kind("decoder", kTarget, kTarget, true, 2));
  view.kinds.push_back(random_kind("cross", kTarget, kSource, false, 3));
  return view;
}

FigureOptions options_of(std::string kind, int64_t layer = -1, std::vector<int64_t> heads = {},
                         int64_t token = -1) {
  FigureOptions options;
  options.kind = std::move(kind);
  options.layer = layer;
  options.heads = std::move(heads);
  options.token = token;
  return options;
}

// One drawn attention line, read back from its attributes.
struct Line {
  int64_t head, query, key;
  std::string stroke;
  double opacity;
};

std::string attribute(const std::string& tag, const std::string& name) {
  std::smatch match;
  const std::regex pattern(" " + name + "=\"([^\"]*)\"");
  if (!std::regex_search(tag, match, pattern)) return "";
  return match[1];
}

std::vector<Line> lines_of(const std::string& svg) {
  std::vector<Line> lines;
  const std::regex line_tag("<line class=\"attention-line\"[^>]*/>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line_tag);
       it != std::sregex_iterator(); ++it) {
    const std::string tag = it->str();
    lines.push_back({std::stoll(attribute(tag, "data-head")),
                     std::stoll(attribute(tag, "data-query")),
                     std::stoll(attribute(tag, "data-key")), attribute(tag, "stroke"),
                     std::stod(attribute(tag, "stroke-opacity"))});
  }
  return lines;
}

const AttentionKind& kind_of(const AttentionView& view, const std::string& name) {
  for (const AttentionKind& kind : view.kinds)
    if (kind.name == name) return kind;
  throw std::logic_error("no kind " + name);
}

// Every line's colour is its head's and its opacity the weight (printed with 4 decimals); the
// weights are not all zero; returns the lines.
std::vector<Line> checked_lines(const AttentionView& view, const FigureOptions& options) {
  const FigureOptions r = resolved(options, view);
  const AttentionKind& kind = kind_of(view, r.kind);
  const std::vector<Line> lines = lines_of(figure_svg(view, options));
  double total = 0;
  for (const Line& line : lines) {
    EXPECT_EQ(line.stroke, head_colour(line.head));
    EXPECT_NEAR(line.opacity, kind.at(r.layer, line.head, line.query, line.key), 5.1e-5)
        << "head " << line.head << " query " << line.query << " key " << line.key;
    if (kind.causal) {
      EXPECT_LE(line.key, line.query);
    }
    total += line.opacity;
  }
  EXPECT_GT(total, 0.5);
  return lines;
}

// A small XML checker: tags balance, names match, and text and attribute values hold no raw '<' or
// a bare '&' (only the five entities and numeric references).
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  const std::regex entity("&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);");
  size_t at = 0;
  const auto check_entities = [&](const std::string& text) -> std::string {
    for (size_t i = text.find('&'); i != std::string::npos; i = text.find('&', i + 1))
      if (!std::regex_search(text.begin() + static_cast<std::ptrdiff_t>(i), text.end(), entity,
                             std::regex_constants::match_continuous))
        return "bare & in '" + text + "'";
    return "";
  };
  while (at < xml.size()) {
    const size_t lt = xml.find('<', at);
    if (std::string problem = check_entities(xml.substr(at, lt - at)); !problem.empty())
      return problem;
    if (lt == std::string::npos) break;
    // A tag ends at the first '>' outside quotes; a '<' inside it is raw markup in a value.
    size_t gt = lt + 1;
    char quote = 0;
    for (; gt < xml.size() && (quote || xml[gt] != '>'); ++gt) {
      if (xml[gt] == '<' && !quote) return "'<' inside a tag at " + std::to_string(gt);
      if (xml[gt] == '<') return "raw '<' in an attribute value at " + std::to_string(gt);
      if (xml[gt] == '"' || xml[gt] == '\'')
        quote = quote == xml[gt] ? 0 : (quote ? quote : xml[gt]);
    }
    if (gt >= xml.size()) return "unterminated tag";
    const std::string tag = xml.substr(lt + 1, gt - lt - 1);
    if (std::string problem = check_entities(tag); !problem.empty()) return problem;
    const bool closing = tag.starts_with("/"), empty = tag.ends_with("/");
    const std::string name = tag.substr(closing, tag.find_first_of(" \n/", closing) - closing);
    if (closing) {
      if (open.empty() || open.back() != name) return "unbalanced </" + name + ">";
      open.pop_back();
    } else if (!empty) {
      open.push_back(name);
    }
    at = gt + 1;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

TEST(AttentionFigure, HeadColoursAreFixedDistinctAndHex) {
  EXPECT_EQ(head_colour(0), "#1f77b4");
  std::set<std::string> colours;
  const std::regex hex("#[0-9a-f]{6}");
  for (int64_t head = 0; head < 64; ++head) {
    const std::string colour = head_colour(head);
    EXPECT_TRUE(std::regex_match(colour, hex)) << colour;
    EXPECT_EQ(colour, head_colour(head));  // deterministic
    colours.insert(colour);
  }
  EXPECT_EQ(colours.size(), 64u);
  expect_error([] { head_colour(-1); }, {"-1"});
}

TEST(AttentionFigure, DrawsOneLinePerHeadQueryAndVisibleKey) {
  const AttentionView view = test_view();
  // 6 source and 5 target tokens; 4 heads.
  EXPECT_EQ(checked_lines(view, options_of("encoder")).size(), 4u * 6 * 6);
  EXPECT_EQ(checked_lines(view, options_of("encoder", 0, {1, 3})).size(), 2u * 6 * 6);
  EXPECT_EQ(checked_lines(view, options_of("encoder", 2, {}, 2)).size(), 4u * 6);
  EXPECT_EQ(checked_lines(view, options_of("encoder", 1, {3}, 5)).size(), 6u);
  EXPECT_EQ(checked_lines(view, options_of("cross")).size(), 4u * 5 * 6);
  // Causal: query q sees keys 0..q, 1 + 2 + 3 + 4 + 5 = 15 pairs.
  EXPECT_EQ(checked_lines(view, options_of("decoder")).size(), 4u * 15);
  EXPECT_EQ(checked_lines(view, options_of("decoder", 0, {2}, 3)).size(), 4u);
}

TEST(AttentionFigure, LinesAreTheChosenHeadsAndQuery) {
  const AttentionView view = test_view();
  std::map<int64_t, int> per_head;
  for (const Line& line : checked_lines(view, options_of("cross", 1, {2, 0}, 4))) {
    EXPECT_EQ(line.query, 4);
    ++per_head[line.head];
  }
  EXPECT_EQ(per_head, (std::map<int64_t, int>{{0, 6}, {2, 6}}));
}

TEST(AttentionFigure, DefaultsAreTheNextToLastLayerAndEveryHead) {
  const AttentionView view = test_view();
  const FigureOptions r = resolved(FigureOptions{}, view);
  EXPECT_EQ(r.kind, "encoder");
  EXPECT_EQ(r.layer, kLayers - 2);
  EXPECT_EQ(r.heads, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(r.token, -1);
  // The lines are layer 1's weights (checked_lines compares with the resolved layer), not layer
  // 0's.
  const std::vector<Line> lines = checked_lines(view, FigureOptions{});
  const AttentionKind& encoder = view.kinds[0];
  double differ = 0;
  for (const Line& line : lines)
    differ =
        std::max(differ, std::abs(line.opacity - encoder.at(0, line.head, line.query, line.key)));
  EXPECT_GT(differ, 0.01);
  EXPECT_NE(figure_svg(view, FigureOptions{}).find("layer 1 (of 0..2)"), std::string::npos);

  // A one-layer model: its only layer.
  AttentionView one = test_view();
  for (AttentionKind& kind : one.kinds) {
    kind.layers = 1;
    kind.weights.resize(kind.weights.size() / kLayers);
  }
  EXPECT_EQ(resolved(FigureOptions{}, one).layer, 0);
  EXPECT_EQ(checked_lines(one, FigureOptions{}).size(), 4u * 6 * 6);
}

TEST(AttentionFigure, IsAStandaloneWellFormedSvg) {
  const AttentionView view = test_view();
  for (const FigureOptions& options :
       {options_of("encoder"), options_of("decoder", 0, {1}, 2), options_of("cross", 2, {3, 0})}) {
    const std::string svg = figure_svg(view, options);
    EXPECT_TRUE(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"")) << svg.substr(0, 80);
    EXPECT_TRUE(svg.ends_with("</svg>\n"));
    EXPECT_EQ(xml_problem(svg), "");
    const std::string root = svg.substr(0, svg.find('>'));
    EXPECT_NE(attribute(root, "width"), "");
    EXPECT_NE(attribute(root, "height"), "");
    EXPECT_NE(attribute(root, "viewBox"), "");
    EXPECT_NE(svg.find("fill=\"#ffffff\""), std::string::npos);  // the white background
    EXPECT_NE(svg.find("font-family=\"sans-serif\""), std::string::npos);
    EXPECT_NE(svg.find("rotate(90"), std::string::npos);
    // No external references, and no ids but the figure's own.
    for (const char* reference : {"href", "url(", "@import", "<image", "@font-face"})
      EXPECT_EQ(svg.find(reference), std::string::npos) << reference;
    const std::regex id(" id=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(svg.begin(), svg.end(), id); it != std::sregex_iterator();
         ++it)
      EXPECT_TRUE((*it)[1].str().starts_with("tfm-figure-")) << it->str();
  }
}

TEST(AttentionFigure, EscapesTokenText) {
  const std::string svg = figure_svg(test_view(), options_of("encoder", 0, {}, 3));
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_NE(svg.find(">&lt;s&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">&lt;/s&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">\u2581&amp;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">\u2581it&#39;s</text>"), std::string::npos);
  // The isolated token's label, in the title too.
  EXPECT_NE(svg.find("\u2581&quot;Jerry&quot;</text>"), std::string::npos);
  EXPECT_NE(svg.find("\u201c\u2581&quot;Jerry&quot;\u201d"), std::string::npos);
  EXPECT_EQ(svg.find("<s>"), std::string::npos);
  EXPECT_EQ(svg.find("</s>"), std::string::npos);
  // The checker itself finds what it must.
  EXPECT_NE(xml_problem("<svg><text><s></text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text a=\"<\">x</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
}

TEST(AttentionFigure, TitleLegendAndHighlightSayWhatIsDrawn) {
  const AttentionView view = test_view();
  const std::string isolated = figure_svg(view, options_of("encoder", 2, {1, 2}, 1));
  EXPECT_NE(isolated.find("encoder attention, layer 2 (of 0..2), heads 1, 2, only the attention of "
                          "\u201c\u2581Tom\u201d (token 1)"),
            std::string::npos);
  // The legend: the drawn heads' colours and numbers (0-based, as the flags and the page), only
  // theirs.
  EXPECT_NE(isolated.find(fmt::format("stroke=\"{}\" stroke-width=\"4\"", head_colour(1))),
            std::string::npos);
  EXPECT_EQ(isolated.find(fmt::format("stroke=\"{}\" stroke-width=\"4\"", head_colour(0))),
            std::string::npos);
  EXPECT_NE(isolated.find(">head 1</text>"), std::string::npos);
  EXPECT_NE(isolated.find(">head 2</text>"), std::string::npos);
  EXPECT_EQ(isolated.find(">head 0</text>"), std::string::npos);
  EXPECT_NE(isolated.find("font-weight=\"bold\">\u2581Tom</text>"), std::string::npos);
  size_t highlights = 0;
  for (size_t i = isolated.find("tfm-figure-highlight"); i != std::string::npos;
       i = isolated.find("tfm-figure-highlight", i + 1))
    ++highlights;
  EXPECT_EQ(highlights, 1u);

  const std::string full = figure_svg(view, options_of("decoder"));
  EXPECT_NE(full.find("decoder attention, layer 1 (of 0..2), all 4 heads<"), std::string::npos);
  EXPECT_EQ(full.find("tfm-figure-highlight"), std::string::npos);
  EXPECT_EQ(full.find("font-weight=\"bold\""), std::string::npos);
}

TEST(AttentionFigure, WidthGrowsWithTheTokensAndHeightWithTheLongest) {
  const auto size_of = [](const AttentionView& view) {
    const std::string svg = figure_svg(view, FigureOptions{});
    const std::string root = svg.substr(0, svg.find('>'));
    return std::pair(std::stod(attribute(root, "width")), std::stod(attribute(root, "height")));
  };
  const auto view_of = [](std::vector<std::string> tokens) {
    AttentionView view;
    view.kinds.push_back(random_kind("encoder", tokens, tokens, false, 7));
    return view;
  };
  std::vector<std::string> short_sentence(6, "ab"), long_sentence(60, "ab");
  const auto [short_width, short_height] = size_of(view_of(short_sentence));
  const auto [long_width, long_height] = size_of(view_of(long_sentence));
  // The same column per token: 54 more tokens, 10 times as wide at least (the title sets the short
  // one's width).
  EXPECT_GE(long_width - short_width, 54 * 15.0);
  EXPECT_EQ(long_height, short_height);
  long_sentence[17] = "\u2581internationalisation";
  const auto [same_width, taller] = size_of(view_of(long_sentence));
  EXPECT_EQ(same_width, long_width);
  // 18 more characters in both rows, at least half a 13px font's size each.
  EXPECT_GE(taller - long_height, 2 * 18 * 6.5);
}

TEST(AttentionFigure, ErrorsNameTheFlagAndTheValue) {
  const AttentionView view = test_view();
  expect_error([&] { resolved(options_of("self"), view); },
               {"--figure-kind", "'self'", "encoder, decoder, cross"});
  expect_error([&] { resolved(options_of("encoder", 3), view); },
               {"--figure-layer 3", "3 layers (0..2)"});
  expect_error([&] { resolved(options_of("encoder", 7), view); }, {"--figure-layer 7"});
  expect_error(
      [&] {
        resolved(options_of("encoder", -1, {0, 4}), view);
      },
      {"--figure-heads", "head 4", "4 heads (0..3)"});
  expect_error([&] { resolved(options_of("encoder", -1, {-2}), view); },
               {"--figure-heads", "head -2"});
  expect_error(
      [&] {
        resolved(options_of("encoder", -1, {1, 2, 1}), view);
      },
      {"--figure-heads", "head 1", "twice"});
  // The way to every token's attention is to leave the option out (it once suggested -1, which
  // the command line refuses).
  const std::string outside = error_of([&] { resolved(options_of("encoder", -1, {}, 6), view); });
  EXPECT_NE(outside.find("--figure-token 6 is outside the encoder attention's 6 query tokens "
                         "(0..5; leave it out for every token's)"),
            std::string::npos)
      << outside;
  EXPECT_EQ(outside.find("-1"), std::string::npos) << outside;
  expect_error([&] { resolved(options_of("decoder", -1, {}, 5), view); },
               {"--figure-token 5", "5 query tokens (0..4"});
  expect_error([&] { resolved(options_of("encoder", -1, {}, -2), view); }, {"--figure-token -2"});
  // figure_svg checks the same way.
  expect_error([&] { figure_svg(view, options_of("cross", 5)); }, {"--figure-layer 5"});
  // A malformed view (too few weights) is an error too, not a read past the end.
  AttentionView broken = test_view();
  broken.kinds[0].weights.pop_back();
  expect_error([&] { figure_svg(broken, FigureOptions{}); }, {"encoder", "weights"});
}

}  // namespace
}  // namespace tfm::internal::viz
