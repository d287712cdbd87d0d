#include "tfm/serve/json_api.h"

#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "tfm/serve/request_error.h"

namespace tfm::internal::serve {

namespace {

using nlohmann::json;

// Parses a request body. A key given twice in one object is refused: nlohmann::json would keep
// the last one silently, so {"q": "a", "q": "b"} would translate "b" without a word.
json parse_body(std::string_view body) {
  std::vector<std::set<std::string>> keys;  // per open object
  auto refuse_repeated_keys = [&keys](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
      throw request_error(400, "malformed JSON: the key \"{}\" is given twice in one object",
                          parsed.get<std::string>());
    return true;
  };
  try {
    return json::parse(body.begin(), body.end(), refuse_repeated_keys);
  } catch (const json::exception& e) {
    // nlohmann's message names the byte and the problem (an ill-formed UTF-8 byte too); a number
    // beyond double (1e400) is its out_of_range, not a parse_error.
    throw request_error(400, "malformed JSON: {}", e.what());
  }
}

int64_t integer_field(const json& object, const char* name, int64_t low) {
  const json& value = object.at(name);
  if (!value.is_number_integer())
    throw request_error(400, "\"{}\" must be an integer, not {}", name, value.type_name());
  const int64_t number = value.get<int64_t>();
  if (number < low)
    throw request_error(400, "\"{}\" must be at least {}, not {}", name, low, number);
  return number;
}

LibreTranslateRequest libretranslate_request(const json& body) {
  if (!body.is_object())
    throw request_error(400, "the body must be a JSON object, not {}", body.type_name());
  LibreTranslateRequest out;
  TranslationRequest& request = out.request;
  if (!body.contains("q")) throw RequestError(400, "missing \"q\": the text to translate");
  const json& q = body.at("q");
  if (q.is_string()) {
    request.sentences.push_back(q.get<std::string>());
  } else if (q.is_array()) {
    out.batch = true;
    for (size_t i = 0; i < q.size(); ++i) {
      if (!q[i].is_string())
        throw request_error(400, "\"q\"[{}] must be a string, not {}", i, q[i].type_name());
      request.sentences.push_back(q[i].get<std::string>());
    }
  } else {
    throw request_error(400, "\"q\" must be a string or a list of strings, not {}", q.type_name());
  }
  if (body.contains("model")) {
    if (!body["model"].is_string())
      throw request_error(400, "\"model\" must be a string, not {}", body["model"].type_name());
    request.model = body["model"].get<std::string>();
  }
  if (body.contains("beam_size")) request.beam_size = integer_field(body, "beam_size", 1);
  if (body.contains("n_best")) request.n_best = integer_field(body, "n_best", 1);
  if (body.contains("alternatives")) {
    const int64_t n_best = integer_field(body, "alternatives", 0) + 1;
    if (body.contains("n_best") && request.n_best != n_best)
      throw request_error(400,
                          "\"alternatives\" {} and \"n_best\" {} disagree (n_best = "
                          "alternatives + 1)",
                          n_best - 1, request.n_best);
    request.n_best = n_best;
  }
  out.alternatives = request.n_best > 1;
  for (const auto& [name, field] :
       {std::pair{"alignment", &request.alignment}, std::pair{"mbr", &request.mbr}}) {
    if (!body.contains(name)) continue;
    if (!body[name].is_boolean())
      throw request_error(400, "\"{}\" must be true or false, not {}", name,
                          body[name].type_name());
    *field = body[name].get<bool>();
  }
  if (body.contains("format")) {
    const json& format = body["format"];
    if (!format.is_string() || format.get<std::string>() != "text")
      throw request_error(400,
                          "\"format\" must be \"text\" (this server translates plain text), not {}",
                          format.dump());
  }
  if (body.contains("api_key")) {
    if (!body["api_key"].is_string())
      throw request_error(400, "\"api_key\" must be a string, not {}", body["api_key"].type_name());
    out.api_key = body["api_key"].get<std::string>();
  }
  return out;  // "source" and "target" (LibreTranslate's languages) are the model's own
}

// A form field as the JSON value it stands for: integers and booleans for the numeric and
// boolean fields, strings for the rest.
json form_value(const std::string& name, const std::string& text) {
  if (name == "beam_size" || name == "n_best" || name == "alternatives") {
    size_t used = 0;
    long long number = 0;
    try {
      number = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size())
      throw request_error(400, "\"{}\" must be an integer, not '{}'", name, text);
    return number;
  }
  if (name == "alignment" || name == "mbr") {
    if (text == "true" || text == "1") return true;
    if (text == "false" || text == "0") return false;
    throw request_error(400, "\"{}\" must be true or false, not '{}'", name, text);
  }
  return text;
}

}  // namespace

LibreTranslateRequest parse_libretranslate(std::string_view body) {
  return libretranslate_request(parse_body(body));
}

LibreTranslateRequest parse_libretranslate_form(
    const std::multimap<std::string, std::string>& fields) {
  json body = json::object();
  if (fields.count("q") > 1) {
    body["q"] = json::array();
    auto [begin, end] = fields.equal_range("q");
    for (auto it = begin; it != end; ++it) body["q"].push_back(it->second);
  }
  for (const auto& [name, value] : fields)
    if (!body.contains(name)) body[name] = form_value(name, value);
  return libretranslate_request(body);
}

json libretranslate_response(const LibreTranslateRequest& request,
                             const TranslationResult& result) {
  json text = json::array(), alternatives = json::array(), alignment = json::array();
  for (const std::vector<TranslatedHypothesis>& hypotheses : result) {
    text.push_back(hypotheses.front().text);
    alignment.push_back(hypotheses.front().alignment);
    json others = json::array();
    for (size_t k = 1; k < hypotheses.size(); ++k) others.push_back(hypotheses[k].text);
    alternatives.push_back(others);
  }
  json out = json::object();
  const bool one = !request.batch;
  out["translatedText"] = one ? text.at(0) : text;
  if (request.alternatives) out["alternatives"] = one ? alternatives.at(0) : alternatives;
  if (request.request.alignment) out["alignment"] = one ? alignment.at(0) : alignment;
  return out;
}

OpenNmtRequest parse_opennmt(std::string_view text) {
  const json body = parse_body(text);
  if (!body.is_array())
    throw request_error(400,
                        "the body must be a list of {{\"src\": ..., \"id\": ...}} objects, "
                        "not {}",
                        body.type_name());
  OpenNmtRequest out;
  for (size_t i = 0; i < body.size(); ++i) {
    const json& item = body[i];
    if (!item.is_object())
      throw request_error(400, "[{}] must be an object, not {}", i, item.type_name());
    if (!item.contains("src") || !item["src"].is_string())
      throw request_error(400, "[{}].src must be a string (the text to translate)", i);
    out.sources.push_back(item["src"].get<std::string>());
    std::string model;
    if (item.contains("id")) {
      const json& id = item["id"];
      if (id.is_number_integer()) {
        model = std::to_string(id.get<int64_t>());
      } else if (id.is_string()) {
        model = id.get<std::string>();
      } else {
        throw request_error(400, "[{}].id must be a model's name or number, not {}", i,
                            id.type_name());
      }
    }
    out.models.push_back(model);
  }
  return out;
}

json opennmt_response(const OpenNmtRequest& request, const TranslationResult& result) {
  json entries = json::array();
  for (size_t i = 0; i < result.size(); ++i)
    for (const TranslatedHypothesis& h : result[i])
      entries.push_back({{"src", request.sources[i]},
                         {"tgt", h.text},
                         {"n_best", result[i].size()},
                         {"pred_score", h.score}});
  return json::array({entries});
}

std::string error_body(const std::string& message) {
  // A message may quote a client's bytes: replace what is not UTF-8 rather than fail to answer.
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tfm::internal::serve
