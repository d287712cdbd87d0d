// The JSON shapes of the translation endpoints, read with every type checked (a RequestError 400
// naming the field otherwise) and written back:
//   POST /translate (LibreTranslate's shape, so that its clients work; JSON or a form):
//     {"q": "text" | ["text", ...], "model"?, "beam_size"?, "n_best"? | "alternatives"?,
//      "alignment"?, "mbr"?, "api_key"?, "source"?, "target"?, "format"? ("text")}
//     -> {"translatedText": "..." | [...], "alternatives"?: [...] | [[...]], "alignment"?: ...}
//   POST /translator/translate (OpenNMT-py's REST server's shape):
//     [{"src": "text", "id"?: model}, ...] -> [[{"src", "tgt", "n_best", "pred_score"}, ...]]
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/serve/translation_service.h"

namespace tfm::internal::serve {

struct LibreTranslateRequest {
  TranslationRequest request;
  bool batch = false;         // "q" was a list: every answer field is a list too
  bool alternatives = false;  // n_best > 1: the answer has "alternatives" (the 2nd..nth best)
  std::string api_key;
};

// A JSON body.
LibreTranslateRequest parse_libretranslate(std::string_view body);
// A form's fields (application/x-www-form-urlencoded; "q" repeated for several sentences).
LibreTranslateRequest parse_libretranslate_form(
    const std::multimap<std::string, std::string>& fields);
nlohmann::json libretranslate_response(const LibreTranslateRequest& request,
                                       const TranslationResult& result);

struct OpenNmtRequest {
  std::vector<std::string> sources;
  std::vector<std::string> models;  // per source: its "id" as a model name ("" : the default)
};

OpenNmtRequest parse_opennmt(std::string_view body);
// Per source, in order, one entry per hypothesis (OpenNMT-py's flat list, in one outer list).
nlohmann::json opennmt_response(const OpenNmtRequest& request, const TranslationResult& result);

// {"error": message}: the body of every error answer.
std::string error_body(const std::string& message);

}  // namespace tfm::internal::serve
