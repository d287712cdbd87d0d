// What the attention pages show (tfm attention): every layer's and head's weights of the three
// kinds of attention of one sentence pair, with the tokens they connect. The weights come from
// decode/ (decode::attention_maps, the incremental decoder that translates); viz/ only draws them.
//
//   page_html():  one self-contained HTML file (inline CSS, JavaScript and SVG; the assets are
//                 source files in viz/assets, compiled in) with a head view, a model view and the
//                 static figure of figure_svg();
//   figure_svg(): the paper's figures 3-5 layout as a standalone SVG: the tokens twice, in a top
//   row
//                 (queries) and a bottom row (keys), joined by one line per weight, one colour per
//                 head, opacity = weight.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tfm::internal::viz {

// One kind of attention (encoder self-attention, decoder self-attention, encoder-decoder attention)
// in every layer and head. weights[((layer * heads + head) * queries + q) * keys + k] is the weight
// query q gives key k; every row sums to 1 over the keys it may see (causal: keys 0..q).
struct AttentionKind {
  std::string name;   // "encoder", "decoder" or "cross": the kind's id in the page and the flags
  std::string title;  // "Encoder self-attention", ...
  std::vector<std::string> queries, keys;  // token labels, as shown
  bool causal = false;                     // query q sees keys 0..q only (decoder self-attention)
  int64_t layers = 0, heads = 0;
  std::vector<float> weights;

  float at(int64_t layer, int64_t head, int64_t q, int64_t k) const {
    const auto nq = static_cast<int64_t>(queries.size()), nk = static_cast<int64_t>(keys.size());
    return weights[static_cast<size_t>(((layer * heads + head) * nq + q) * nk + k)];
  }
};

struct AttentionView {
  std::string title;                 // shown at the top of the page, e.g. "model: runs/x/averaged"
  std::string source, target;        // the sentence pair as text
  bool merged_words = false;         // tokens are whole words (see decode/alignment.h), not pieces
  std::vector<AttentionKind> kinds;  // encoder, decoder, cross (in that order)
};

// The paper's static layout for one kind, layer and set of heads.
struct FigureOptions {
  std::string kind = "encoder";  // "encoder", "decoder" or "cross"
  int64_t layer = -1;            // 0-based; < 0: the next to last layer (the paper's "5 of 6")
  std::vector<int64_t> heads;    // 0-based; empty: every head
  int64_t token = -1;            // 0-based query; >= 0: only that token's attention (figure 3)
};

// One colour per head ("#rrggbb"), the same in the page and the figure.
std::string head_colour(int64_t head);

// Checks the options against the view (known kind, layer, heads and token in range) and fills in
// the defaults (layer, heads); errors name the flag's value.
FigureOptions resolved(const FigureOptions& options, const AttentionView& view);

// The standalone SVG (an XML document with its own xmlns).
std::string figure_svg(const AttentionView& view, const FigureOptions& options);

// The page's data: the JSON object the page's JavaScript reads (docs/ATTENTION.md, "The page's
// data"). Weights are written with 6 decimals (off by at most 5e-7).
nlohmann::json page_data(const AttentionView& view);

// The whole page: viz/assets' HTML with the CSS, the JavaScript, page_data() and figure_svg() in
// it.
std::string page_html(const AttentionView& view, const FigureOptions& figure);

}  // namespace tfm::internal::viz
