// The viz pages' assets (src/tfm/viz/assets: HTML, CSS, JavaScript) as text compiled into the
// library, so that a page needs no file beside the program. The definitions are generated at build
// time by cmake/embed_assets.cmake, one constant per file, named after it.
#pragma once

namespace tfm::internal::viz::assets {

extern const char* const attention_page_html;  // the template, with {{TFM_...}} placeholders
extern const char* const attention_page_css;
extern const char* const attention_page_js;

}  // namespace tfm::internal::viz::assets
