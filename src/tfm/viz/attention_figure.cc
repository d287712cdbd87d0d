// The paper's figures 3-5 (tfm attention's static figure): the tokens twice, the queries in a top
// row and the keys in a bottom row, written vertically, joined by one thin line per head and
// (query, key) pair in the head's colour, its opacity the weight. Layers and heads are numbered
// from 1 in the figure's text, as in the paper ("layer 5 of 6", "head 5"); options, errors and the
// lines' data-* attributes use the 0-based indices of the flags.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/core/error.h"
#include "tfm/viz/attention_view.h"
#include "tfm/viz/markup.h"

namespace tfm::internal::viz {
namespace {

// Sizes in pixels. Every token gets a column of the same width whatever the sentence's length, so a
// long sentence makes a wider figure rather than cramped text.
constexpr double kColumn = 22;        // one token's column
constexpr double kFont = 13;          // token text
constexpr double kTitleFont = 14;     // the title line
constexpr double kLegendFont = 12;    // the legend's head labels
constexpr double kMargin = 16;        // around everything
constexpr double kGap = 6;            // between a token's text and its lines' ends
constexpr double kLinesHeight = 150;  // from the top row's anchors to the bottom row's
// A generous guess of a sans-serif glyph's advance, in font sizes: the SVG has no font metrics, and
// a guess too short would cut the longest token off.
constexpr double kAdvance = 0.62;

// The 10 Tableau colours, then 6 darker ones that differ from them and from each other.
constexpr std::array<std::string_view, 16> kPalette = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#0b6e4f"};

// "#rrggbb" of an HSL colour (h in degrees, s and l in 0..1).
std::string hsl_colour(double h, double s, double l) {
  const double c = (1 - std::abs(2 * l - 1)) * s;
  const double x = c * (1 - std::abs(std::fmod(h / 60, 2.0) - 1));
  const double m = l - c / 2;
  double r = 0, g = 0, b = 0;
  if (h < 60) {
    r = c, g = x;
  } else if (h < 120) {
    r = x, g = c;
  } else if (h < 180) {
    g = c, b = x;
  } else if (h < 240) {
    g = x, b = c;
  } else if (h < 300) {
    r = x, b = c;
  } else {
    r = c, b = x;
  }
  const auto byte = [&](double v) { return static_cast<int>(std::lround((v + m) * 255)); };
  return fmt::format("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b));
}

const AttentionKind& kind_named(const AttentionView& view, const std::string& name) {
  std::string known;
  for (const AttentionKind& kind : view.kinds) {
    if (kind.name == name) return kind;
    known += fmt::format("{}{}", known.empty() ? "" : ", ", kind.name);
  }
  fail("--figure-kind '{}' is not a kind of attention of this view (known: {})", name, known);
}

// The text's length in pixels, guessed from its characters (UTF-8 code points, not bytes).
double text_length(std::string_view text, double font) {
  const auto points = std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  });
  return static_cast<double>(points) * font * kAdvance;
}

double longest(const std::vector<std::string>& labels) {
  double length = 0;
  for (const std::string& label : labels) length = std::max(length, text_length(label, kFont));
  return length;
}

// "all 8 heads", "head 4", "heads 4, 5" (0-based, as every flag and the page count them; the
// paper's "heads 5 and 6").
std::string heads_text(const std::vector<int64_t>& heads, int64_t all) {
  if (static_cast<int64_t>(heads.size()) == all && all > 1) return fmt::format("all {} heads", all);
  std::string numbers;
  for (int64_t head : heads) numbers += fmt::format("{}{}", numbers.empty() ? "" : ", ", head);
  return fmt::format("{} {}", heads.size() == 1 ? "head" : "heads", numbers);
}

std::string title_text(const AttentionKind& kind, const FigureOptions& options) {
  std::string title = fmt::format("{}, layer {} (of 0..{}), {}", kind.title, options.layer,
                                  kind.layers - 1, heads_text(options.heads, kind.heads));
  if (options.token >= 0)
    title += fmt::format(", only the attention of \u201c{}\u201d (token {})",
                         kind.queries[static_cast<size_t>(options.token)], options.token);
  return title;
}

// Where everything goes: the rows' first columns (each row centred), the title and legend lines,
// and the two rows of line ends.
struct Layout {
  double width = 0, height = 0;
  double title_y = 0, legend_y = 0;
  double top_y = 0, bottom_y = 0;   // the lines' ends: below the queries' text, above the keys'
  double query_x0 = 0, key_x0 = 0;  // the centre of the first token of each row
};

double legend_width(size_t heads) {
  return static_cast<double>(heads) * 64;
}

Layout layout(const AttentionKind& kind, const FigureOptions& options, const std::string& title) {
  const auto nq = static_cast<double>(kind.queries.size());
  const auto nk = static_cast<double>(kind.keys.size());
  Layout l;
  const double rows = std::max(nq, nk) * kColumn;
  l.width = 2 * kMargin +
            std::max({rows, text_length(title, kTitleFont), legend_width(options.heads.size())});
  l.title_y = kMargin + kTitleFont;
  l.legend_y = l.title_y + 10 + kLegendFont;
  l.top_y = l.legend_y + 14 + longest(kind.queries) + kGap;
  l.bottom_y = l.top_y + kLinesHeight;
  l.height = l.bottom_y + kGap + longest(kind.keys) + kMargin;
  l.query_x0 = (l.width - nq * kColumn) / 2 + kColumn / 2;
  l.key_x0 = (l.width - nk * kColumn) / 2 + kColumn / 2;
  return l;
}

// A coloured stroke and "head N" per drawn head, in one row under the title.
void draw_legend(std::string& svg, const std::vector<int64_t>& heads, const Layout& l) {
  svg += fmt::format("<g class=\"tfm-figure-legend\" font-size=\"{}\">\n", kLegendFont);
  double x = kMargin;
  for (int64_t head : heads) {
    const double y = l.legend_y - kLegendFont / 3;
    svg += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"4\"/><text x=\"{:.1f}\" y=\"{:.1f}\">head {}</text>\n",
        x, y, x + 14, y, head_colour(head), x + 18, l.legend_y, head);
    x += legend_width(1);
  }
  svg += "</g>\n";
}

// One row of tokens, each written top to bottom (rotated 90 degrees) in its column: the top row
// ends at `y` (its text above the lines), the bottom row starts there. The highlighted token (the
// isolated query, or -1) is bold on a light box.
void draw_row(std::string& svg, const std::vector<std::string>& labels, double x0, double y,
              bool top, int64_t highlight) {
  svg += fmt::format("<g class=\"tfm-figure-{}\" font-size=\"{}\">\n", top ? "queries" : "keys",
                     kFont);
  for (size_t i = 0; i < labels.size(); ++i) {
    const double x = x0 + static_cast<double>(i) * kColumn;
    const bool marked = static_cast<int64_t>(i) == highlight;
    if (marked) {
      const double length = text_length(labels[i], kFont) + 6;
      svg += fmt::format(
          "<rect class=\"tfm-figure-highlight\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
          "height=\"{:.1f}\" rx=\"3\" fill=\"#fde9a9\"/>\n",
          x - kColumn / 2 + 2, top ? y - length : y, kColumn - 4, length);
    }
    // dominant-baseline central puts the glyphs' middle, not their baseline, on the column's
    // centre.
    svg += fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1:.1f}\" transform=\"rotate(90 {0:.1f} {1:.1f})\" "
        "text-anchor=\"{2}\" dominant-baseline=\"central\"{3}>{4}</text>\n",
        x, top ? y - kGap / 2 : y + kGap / 2, top ? "end" : "start",
        marked ? " font-weight=\"bold\"" : "", markup_escaped(labels[i]));
  }
  svg += "</g>\n";
}

// One line per head and (query, key) pair the query may see, every weight drawn (however small:
// a weight of 0.001 is all but invisible anyway, and the count stays simple). Thin lines, as in the
// paper; one query's lines a little thicker, as there are few of them.
void draw_lines(std::string& svg, const AttentionKind& kind, const FigureOptions& options,
                const Layout& l) {
  const auto nq = static_cast<int64_t>(kind.queries.size());
  const auto nk = static_cast<int64_t>(kind.keys.size());
  const int64_t first = options.token >= 0 ? options.token : 0;
  const int64_t last = options.token >= 0 ? options.token + 1 : nq;
  svg +=
      fmt::format("<g class=\"tfm-figure-lines\" stroke-width=\"{}\" stroke-linecap=\"round\">\n",
                  options.token >= 0 ? 2 : 1.2);
  for (int64_t head : options.heads) {
    const std::string colour = head_colour(head);
    for (int64_t q = first; q < last; ++q) {
      const double x1 = l.query_x0 + static_cast<double>(q) * kColumn;
      for (int64_t k = 0; k < (kind.causal ? std::min(q + 1, nk) : nk); ++k) {
        // A weight outside 0..1 (none of a softmax) or NaN would be an invalid opacity.
        const float w = kind.at(options.layer, head, q, k);
        const double opacity = w > 0 ? std::min(1.0, static_cast<double>(w)) : 0.0;
        svg += fmt::format(
            "<line class=\"attention-line\" data-head=\"{}\" data-query=\"{}\" data-key=\"{}\" "
            "x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
            "stroke-opacity=\"{:.4f}\"/>\n",
            head, q, k, x1, l.top_y, l.key_x0 + static_cast<double>(k) * kColumn, l.bottom_y,
            colour, opacity);
      }
    }
  }
  svg += "</g>\n";
}

}  // namespace

std::string head_colour(int64_t head) {
  TFM_CHECK(head >= 0, "head {} has no colour (heads count from 0)", head);
  if (head < static_cast<int64_t>(kPalette.size())) return std::string(kPalette[head]);
  // Past the palette: hues a golden angle apart, which never repeat and stay apart from their
  // neighbours; mid saturation and lightness, dark enough for thin lines on white.
  return hsl_colour(std::fmod(static_cast<double>(head) * 137.508, 360.0), 0.65, 0.45);
}

FigureOptions resolved(const FigureOptions& options, const AttentionView& view) {
  const AttentionKind& kind = kind_named(view, options.kind);
  const auto nq = static_cast<int64_t>(kind.queries.size());
  const auto nk = static_cast<int64_t>(kind.keys.size());
  TFM_CHECK(kind.layers > 0 && kind.heads > 0 && nq > 0 && nk > 0,
            "the {} attention has no weights to draw ({} layers, {} heads, {} x {} tokens)",
            kind.name, kind.layers, kind.heads, nq, nk);
  TFM_CHECK(kind.weights.size() == static_cast<size_t>(kind.layers * kind.heads * nq * nk),
            "the {} attention has {} weights, expected {} layers x {} heads x {} x {} tokens",
            kind.name, kind.weights.size(), kind.layers, kind.heads, nq, nk);

  FigureOptions r = options;
  // The paper's figures show layer 5 of 6: the next to last.
  if (r.layer < 0) r.layer = kind.layers >= 2 ? kind.layers - 2 : 0;
  TFM_CHECK(r.layer < kind.layers, "--figure-layer {} is outside the model's {} layers (0..{})",
            r.layer, kind.layers, kind.layers - 1);

  if (r.heads.empty())
    for (int64_t head = 0; head < kind.heads; ++head) r.heads.push_back(head);
  std::set<int64_t> seen;
  for (int64_t head : r.heads) {
    TFM_CHECK(head >= 0 && head < kind.heads,
              "--figure-heads: head {} is outside the model's {} heads (0..{})", head, kind.heads,
              kind.heads - 1);
    TFM_CHECK(seen.insert(head).second, "--figure-heads: head {} is given twice", head);
  }

  TFM_CHECK(
      r.token >= -1 && r.token < nq,
      "--figure-token {} is outside the {} attention's {} query tokens (0..{}; leave it out for "
      "every token's)",
      r.token, kind.name, nq, nq - 1);
  return r;
}

std::string figure_svg(const AttentionView& view, const FigureOptions& options) {
  const FigureOptions r = resolved(options, view);
  const AttentionKind& kind = kind_named(view, r.kind);
  const std::string title = title_text(kind, r);
  const Layout l = layout(kind, r, title);

  // No XML declaration, so that the same text can be inlined into HTML; no ids (nothing to clash
  // with the page's), no external fonts or links.
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"tfm-figure\" width=\"{0:.0f}\" "
      "height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\">\n"
      "<rect class=\"tfm-figure-background\" x=\"0\" y=\"0\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "fill=\"#ffffff\"/>\n"
      "<text class=\"tfm-figure-title\" x=\"{2:.1f}\" y=\"{3:.1f}\" font-size=\"{4}\">{5}</text>\n",
      std::ceil(l.width), std::ceil(l.height), kMargin, l.title_y, kTitleFont,
      markup_escaped(title));
  draw_legend(svg, r.heads, l);
  draw_lines(svg, kind, r, l);
  draw_row(svg, kind.queries, l.query_x0, l.top_y, true, r.token);
  draw_row(svg, kind.keys, l.key_x0, l.bottom_y, false, -1);
  svg += "</svg>\n";
  return svg;
}

}  // namespace tfm::internal::viz
