// Text for HTML and SVG (XML) markup, shared by the page and the figure.
#pragma once

#include <string>
#include <string_view>

namespace tfm::internal::viz {

// The five characters with a meaning in markup as entities (&amp; &lt; &gt; &quot; &#39;), valid
// in HTML and XML text and attribute values alike.
std::string markup_escaped(std::string_view text);

}  // namespace tfm::internal::viz
