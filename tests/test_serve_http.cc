// tfm serve's endpoints over loopback (an in-process server, httplib's client): the answers equal
// the model's own translations, concurrent requests get their own sentences in order, every limit
// and error has its status and a JSON message, and a stop lets the requests in flight finish.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include "serve_test_util.h"
#include "tfm/decode/alignment.h"
#include "tfm/eval/mbr.h"

namespace tfm::internal::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::vector<std::string> kSentences = generated_sentences(12, false, 21);

ServeSettings quick() {
  ServeSettings s;
  s.search = tiny_search();
  s.queue.max_delay = 2ms;
  s.queue.threads_per_worker = 1;
  return s;
}

// The value of an unlabelled metric in Prometheus text.
double metric_value(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  EXPECT_NE(at, std::string::npos) << name << " missing in\n" << text;
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
}

// /metrics once it contains `wanted`, or after 10 s. A request is counted by httplib's logger,
// which runs after its answer is written: a client can read its answer just before that.
std::string metrics_with(httplib::Client& client, const std::string& wanted) {
  std::string text;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
    text = client.Get("/metrics")->body;
    if (text.find(wanted) != std::string::npos) break;
  }
  return text;
}

json body_of(const httplib::Result& result) {
  EXPECT_TRUE(result) << "no answer";
  return result ? json::parse(result->body) : json();
}

// The status and the {"error": ...} message of an answer.
void expect_error(const httplib::Result& result, int status, const std::string& part) {
  ASSERT_TRUE(result) << "no answer";
  EXPECT_EQ(result->status, status) << result->body;
  EXPECT_EQ(result->get_header_value("Content-Type"), "application/json");
  const json body = json::parse(result->body);
  ASSERT_TRUE(body.contains("error")) << result->body;
  EXPECT_NE(body["error"].get<std::string>().find(part), std::string::npos) << result->body;
}

TEST(ServeHttp, TranslateAnswersAsTheModelTranslates) {
  TempDir dir;
  TestServer server(dir.path(), quick());
  server.wait_ready();
  auto client = server.client();
  // One sentence: a string back.
  json out = body_of(post_json(client, "/translate", json{{"q", kSentences[0]}}.dump()));
  EXPECT_EQ(out, json({{"translatedText", server.expected_text(0, kSentences[0])}}));
  // A list, an empty sentence among them: a list back, in order.
  std::vector<std::string> q = {kSentences[1], "", kSentences[2]};
  out = body_of(post_json(client, "/translate", json{{"q", q}}.dump()));
  EXPECT_EQ(out["translatedText"],
            json({server.expected_text(0, q[0]), "", server.expected_text(0, q[2])}));
  // Another model, another beam.
  out = body_of(post_json(client, "/translate",
                          json{{"q", kSentences[3]}, {"model", "other"}, {"beam_size", 2}}.dump()));
  EXPECT_EQ(out["translatedText"], server.expected_text(1, kSentences[3], 2));
  // n-best: the 2nd and 3rd best as "alternatives"; LibreTranslate's "alternatives": 2 the same.
  const auto nbest = server.expected(0, kSentences[4], 4, 3);
  ASSERT_EQ(nbest.size(), 3u);
  for (const auto& [field, count] : {std::pair{"n_best", 3}, std::pair{"alternatives", 2}}) {
    out =
        body_of(post_json(client, "/translate", json{{"q", kSentences[4]}, {field, count}}.dump()));
    EXPECT_EQ(out["translatedText"], server.text(0, nbest[0].tokens));
    EXPECT_EQ(out["alternatives"],
              json({server.text(0, nbest[1].tokens), server.text(0, nbest[2].tokens)}));
  }
  // "mbr": the n best's minimum Bayes risk choice (eval/mbr.h) as the translation, the others as
  // the alternatives in the search's order. This random model's hypotheses share no 13a token, so
  // the choice is its best; CliServe.MbrAnswersEqualTfmTranslateMbr shows a choice that is not.
  for (const std::string& sentence : {kSentences[7], kSentences[8]}) {
    std::vector<std::string> texts;
    std::vector<double> scores;
    for (const auto& h : server.expected(0, sentence, 4, 4)) {
      texts.push_back(server.text(0, h.tokens));
      scores.push_back(h.score);
    }
    const size_t choice = eval::mbr_choice(texts, scores);
    json others = json::array();
    for (size_t i = 0; i < texts.size(); ++i)
      if (i != choice) others.push_back(texts[i]);
    out = body_of(post_json(client, "/translate",
                            json{{"q", sentence}, {"n_best", 4}, {"mbr", true}}.dump()));
    EXPECT_EQ(out["translatedText"], texts[choice]) << sentence;
    EXPECT_EQ(out["alternatives"], others) << sentence;
  }
  // Alignment: the Pharaoh pairs of the last layer's attention, as tfm translate --alignment.
  out = body_of(
      post_json(client, "/translate", json{{"q", kSentences[5]}, {"alignment", true}}.dump()));
  const auto aligned = server.expected(0, kSentences[5], 4, 1, true).front();
  EXPECT_EQ(out["alignment"], decode::pharaoh(decode::align_translation(
                                  aligned.attention, server.pieces(0, kSentences[5]),
                                  server.pieces(0, aligned.tokens), 0.0)));
  EXPECT_EQ(out["translatedText"], server.expected_text(0, kSentences[5]));
  // A form, as LibreTranslate's own clients send.
  auto form = client.Post("/translate", "q=" + httplib::detail::encode_query_param(kSentences[6]),
                          "application/x-www-form-urlencoded");
  EXPECT_EQ(body_of(form)["translatedText"], server.expected_text(0, kSentences[6]));
}

TEST(ServeHttp, OpenNmtShapeAnswersPerSourceInOrder) {
  TempDir dir;
  TestServer server(dir.path(), quick());
  server.wait_ready();
  auto client = server.client();
  const json request = json::array({{{"src", kSentences[0]}, {"id", "tiny"}},
                                    {{"src", kSentences[1]}, {"id", "other"}},
                                    {{"src", kSentences[2]}}});
  const json out = body_of(post_json(client, "/translator/translate", request.dump()));
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 3u);
  const std::vector<size_t> models = {0, 1, 0};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[0][i]["src"], kSentences[i]);
    EXPECT_EQ(out[0][i]["tgt"], server.expected_text(models[i], kSentences[i]));
    EXPECT_EQ(out[0][i]["n_best"], 1);
    EXPECT_NEAR(out[0][i]["pred_score"].get<double>(),
                server.expected(models[i], kSentences[i]).front().score, 1e-4);
  }
  expect_error(post_json(client, "/translator/translate", R"([{"src": "a", "id": 100}])"), 400,
               "unknown model '100'; this server has: tiny, other");
  expect_error(post_json(client, "/translator/translate", R"({"src": "a"})"), 400,
               "must be a list");
  expect_error(post_json(client, "/translator/translate", R"([{"text": "a"}])"), 400,
               "[0].src must be a string");
}

TEST(ServeHttp, ConcurrentRequestsGetTheirOwnSentencesInOrder) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.queue.max_delay = 20ms;  // so that requests share batches
  settings.queue.workers = 2;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  std::vector<std::string> expected;
  for (const std::string& s : kSentences) expected.push_back(server.expected_text(0, s));
  constexpr int kClients = 16;
  std::vector<std::thread> clients;
  std::vector<std::string> failures(kClients);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = server.client();
      for (int round = 0; round < 3; ++round) {
        std::vector<size_t> picks;
        for (int k = 0; k <= (c + round) % 4; ++k)
          picks.push_back(static_cast<size_t>(c * 3 + round * 5 + k * 7) % kSentences.size());
        json q = json::array();
        for (size_t p : picks) q.push_back(kSentences[p]);
        auto result = post_json(client, "/translate", json{{"q", q}}.dump());
        if (!result || result->status != 200) {
          failures[c] = "no 200";
          return;
        }
        const json out = json::parse(result->body)["translatedText"];
        for (size_t k = 0; k < picks.size(); ++k)
          if (out.at(k) != expected[picks[k]]) failures[c] = "wrong translation";
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
  // The metrics saw batches of several sentences.
  auto client = server.client();
  const std::string requests = "tfm_http_requests_total{code=\"200\",endpoint=\"/translate\"} 48";
  const std::string metrics = metrics_with(client, requests);
  EXPECT_NE(metrics.find(requests), std::string::npos) << metrics;
  // Every sentence decoded once, in fewer batches than sentences.
  int sent = 0;
  for (int c = 0; c < kClients; ++c)
    for (int round = 0; round < 3; ++round) sent += 1 + (c + round) % 4;
  const double sentences = metric_value(metrics, "tfm_translated_sentences_total");
  EXPECT_EQ(sentences, sent);
  EXPECT_EQ(metric_value(metrics, "tfm_batch_sentences_sum"), sent);
  EXPECT_LT(metric_value(metrics, "tfm_batch_sentences_count"), sentences);
}

TEST(ServeHttp, BadRequestsAre400WithAMessageNamingTheProblem) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.limits.max_sentences = 3;
  settings.limits.max_sentence_chars = 40;
  settings.limits.max_beam_size = 5;
  settings.search.max_input_length = 12;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  auto client = server.client();
  expect_error(post_json(client, "/translate", "{\"q\": \"a"), 400, "malformed JSON");
  expect_error(post_json(client, "/translate", "[1, 2]"), 400, "must be a JSON object, not array");
  expect_error(post_json(client, "/translate", "{}"), 400, "missing \"q\"");
  expect_error(post_json(client, "/translate", R"({"q": 5})"), 400,
               "\"q\" must be a string or a list of strings, not number");
  expect_error(post_json(client, "/translate", R"({"q": ["a", null]})"), 400,
               "\"q\"[1] must be a string, not null");
  expect_error(post_json(client, "/translate", R"({"q": "a", "beam_size": "4"})"), 400,
               "\"beam_size\" must be an integer, not string");
  expect_error(post_json(client, "/translate", R"({"q": "a", "beam_size": 0})"), 400,
               "\"beam_size\" must be at least 1, not 0");
  expect_error(post_json(client, "/translate", R"({"q": "a", "beam_size": 6})"), 400,
               "beam_size 6 is more than the maximum 5");
  expect_error(post_json(client, "/translate", R"({"q": "a", "beam_size": 2, "n_best": 3})"), 400,
               "n_best 3 must be between 1 and the beam size 2");
  expect_error(post_json(client, "/translate", R"({"q": "a", "alignment": 1})"), 400,
               "\"alignment\" must be true or false, not number");
  expect_error(post_json(client, "/translate", R"({"q": "a", "mbr": "yes"})"), 400,
               "\"mbr\" must be true or false, not string");
  expect_error(post_json(client, "/translate", R"({"q": "a", "mbr": true})"), 400,
               "mbr chooses from the n-best list: ask for n_best of at least 2");
  expect_error(post_json(client, "/translate", R"({"q": "a", "format": "html"})"), 400,
               "\"format\" must be \"text\"");
  expect_error(post_json(client, "/translate", R"({"q": "a", "model": "nope"})"), 400,
               "unknown model 'nope'; this server has: tiny, other");
  expect_error(post_json(client, "/translate", R"({"q": ["a", "b", "c", "d"]})"), 400,
               "4 sentences in one request, more than the maximum 3");
  expect_error(post_json(client, "/translate", json{{"q", std::string(41, 'a')}}.dump()), 400,
               "sentence 0: 41 bytes, more than the maximum 40");
  expect_error(
      post_json(client, "/translate", json{{"q", {"a", "ab cd ef gh ij kl mn op qr st"}}}.dump()),
      400, "sentence 1: ");
  expect_error(
      post_json(client, "/translate", json{{"q", {"a", "ab cd ef gh ij kl mn op qr st"}}}.dump()),
      400, "more than the maximum input length 12");
  // Invalid UTF-8 inside a JSON string, and in a form's field.
  expect_error(post_json(client, "/translate", "{\"q\": \"caf\xC3\x28\"}"), 400, "UTF-8");
  expect_error(client.Post("/translate", "q=caf%C3%28", "application/x-www-form-urlencoded"), 400,
               "sentence 0: invalid UTF-8 at byte 3");
  expect_error(client.Post("/translate", "q=a&beam_size=x", "application/x-www-form-urlencoded"),
               400, "\"beam_size\" must be an integer, not 'x'");
  // Unknown endpoints and methods.
  expect_error(client.Get("/nope"), 404, "no such endpoint: GET /nope");
  expect_error(client.Get("/translate"), 404, "no such endpoint: GET /translate");
  // The server still answers.
  EXPECT_EQ(client.Get("/health")->status, 200);
  const std::string bad = "tfm_http_requests_total{code=\"400\",endpoint=\"/translate\"} 21";
  const std::string metrics = metrics_with(client, bad);
  EXPECT_NE(metrics.find(bad), std::string::npos) << metrics;
}

TEST(ServeHttp, ABodyOverTheLimitIs413) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.server.max_body_bytes = 1000;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  auto client = server.client();
  expect_error(post_json(client, "/translate", json{{"q", std::string(2000, 'a')}}.dump()), 413,
               "request body larger than the maximum 1000 bytes");
  EXPECT_EQ(post_json(client, "/translate", json{{"q", "a b"}}.dump())->status, 200);
}

TEST(ServeHttp, AnApiKeyIsNeededWhenConfigured) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.server.api_key = "s3cret";
  TestServer server(dir.path(), settings);
  server.wait_ready();
  auto client = server.client();
  const std::string body = json{{"q", kSentences[0]}}.dump();
  expect_error(post_json(client, "/translate", body), 401, "a valid API key is needed");
  expect_error(post_json(client, "/translate", json{{"q", "a"}, {"api_key", "wrong"}}.dump()), 401,
               "API key");
  expect_error(post_json(client, "/translator/translate", R"([{"src": "a"}])"), 401, "API key");
  EXPECT_EQ(post_json(client, "/translate", json{{"q", "a"}, {"api_key", "s3cret"}}.dump())->status,
            200);
  httplib::Headers bearer = {{"Authorization", "Bearer s3cret"}};
  EXPECT_EQ(client.Post("/translate", bearer, body, "application/json")->status, 200);
  EXPECT_EQ(
      client.Post("/translator/translate", bearer, R"([{"src": "a"}])", "application/json")->status,
      200);
  EXPECT_EQ(client.Post("/translate", {{"X-API-Key", "s3cret"}}, body, "application/json")->status,
            200);
  EXPECT_EQ(client.Get("/health")->status, 200);  // health and metrics need no key
}

TEST(ServeHttp, HealthIs503UntilTheModelsAreLoaded) {
  TempDir dir;
  ServeSettings settings = quick();
  std::promise<void> release;
  settings.loaded = release.get_future().share();
  TestServer server(dir.path(), settings);
  auto client = server.client();
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_EQ(health->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(health->body)["status"], "loading");
  expect_error(post_json(client, "/translate", json{{"q", "a"}}.dump()), 503,
               "the models are still loading");
  EXPECT_NE(client.Get("/metrics")->body.find("tfm_ready 0"), std::string::npos);
  expect_error(client.Get("/models"), 503, "the models are still loading");
  release.set_value();
  server.wait_ready();
  health = client.Get("/health");
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["models"], json({"tiny", "other"}));
  EXPECT_NE(client.Get("/metrics")->body.find("tfm_ready 1"), std::string::npos);
  const json models = body_of(client.Get("/models"));
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]["name"], "tiny");
  EXPECT_EQ(models[1]["name"], "other");
  EXPECT_EQ(models[0]["layers"], 2);
  EXPECT_EQ(models[0]["decoder_layers"], 2);
  EXPECT_EQ(models[0]["vocab_size"], 120);
  EXPECT_EQ(models[0]["precision"], "f32");
}

TEST(ServeHttp, AFullQueueIs503WithRetryAfterAndASlowTranslationIs504) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.queue.max_queued_sentences = 2;
  settings.queue.max_delay = 300ms;
  settings.queue.batch_tokens = 1 << 20;
  settings.limits.timeout = 100ms;  // shorter than the delay: every translation times out
  TestServer server(dir.path(), settings);
  server.wait_ready();
  auto client = server.client();
  auto full = post_json(client, "/translate", json{{"q", {"a", "b", "c"}}}.dump());
  expect_error(full, 503, "the queue is full (0 sentences waiting, at most 2)");
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  expect_error(post_json(client, "/translate", json{{"q", "a b"}}.dump()), 504,
               "longer than the request timeout (100 ms)");
  // The timed-out sentence left the queue.
  EXPECT_EQ(json::parse(client.Get("/health")->body)["queued_sentences"], 0);
}

TEST(ServeHttp, StoppingLetsTheRequestsInFlightFinish) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.queue.max_delay = 400ms;  // the requests are still queued when stop() comes
  settings.queue.batch_tokens = 1 << 20;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  std::vector<std::thread> clients;
  std::vector<std::string> answers(6);
  for (size_t c = 0; c < answers.size(); ++c)
    clients.emplace_back([&, c] {
      auto client = server.client();
      auto result = post_json(client, "/translate", json{{"q", kSentences[c]}}.dump());
      answers[c] = result && result->status == 200
                       ? json::parse(result->body)["translatedText"].get<std::string>()
                       : "failed";
    });
  std::this_thread::sleep_for(150ms);
  const auto start = serve::Clock::now();
  server.stop();  // returns once every request is answered
  EXPECT_LT(serve::Clock::now() - start, 10s);
  for (auto& t : clients) t.join();
  for (size_t c = 0; c < answers.size(); ++c)
    EXPECT_EQ(answers[c], server.expected_text(0, kSentences[c])) << c;
  // No new connection is accepted.
  auto late = server.client();
  late.set_connection_timeout(1);
  EXPECT_FALSE(late.Get("/health"));
}

TEST(ServeHttp, AClientThatHangsUpBeforeItsAnswerDoesNotStopTheServer) {
  // SIGPIPE's default action (terminate), whatever this process inherited: the server must set
  // its own disposition.
  std::signal(SIGPIPE, SIG_DFL);
  TempDir dir;
  ServeSettings settings = quick();
  settings.queue.max_delay = 100ms;  // the client is gone when the answer is written
  settings.limits.max_sentences = 1000;
  settings.queue.max_queued_sentences = 2000;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  // A large answer (many writes) to a connection reset (SO_LINGER 0: RST, not FIN) meanwhile.
  json q = json::array();
  for (int i = 0; i < 400; ++i) q.push_back(kSentences[static_cast<size_t>(i) % kSentences.size()]);
  const std::string body = json{{"q", q}}.dump();
  for (int round = 0; round < 3; ++round) {
    const int sock = connect_to(server.port());
    ASSERT_GE(sock, 0);
    const std::string request = fmt::format(
        "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: {}\r\n\r\n{}",
        body.size(), body);
    ASSERT_EQ(::send(sock, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    std::this_thread::sleep_for(40ms);  // read by the server, and waiting in the queue
    const linger reset{1, 0};
    setsockopt(sock, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    ::close(sock);
  }
  std::this_thread::sleep_for(1s);  // the answers are written to the reset connections
  auto client = server.client();
  EXPECT_EQ(client.Get("/health")->status, 200);
  EXPECT_EQ(post_json(client, "/translate", json{{"q", "a b"}}.dump())->status, 200);
}

TEST(ServeHttp, ASlowClientIsCutOffAndOthersAreStillServed) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.server.io_timeout = 1s;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  // Half a request, then silence.
  const int sock = connect_to(server.port());
  ASSERT_GE(sock, 0);
  const std::string partial =
      "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"q\"";
  ASSERT_EQ(::send(sock, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
  auto client = server.client();
  EXPECT_EQ(post_json(client, "/translate", json{{"q", "a b"}}.dump())->status, 200);
  // The server gives up on it after the timeout and closes the connection.
  timeval wait{5, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  const auto start = serve::Clock::now();
  char buffer[512];
  const ssize_t got = ::recv(sock, buffer, sizeof(buffer), 0);
  EXPECT_LT(serve::Clock::now() - start, 4s);
  EXPECT_GE(got, 0);  // an answer (400) or the close, not our 5 s timeout
  ::close(sock);
  EXPECT_EQ(client.Get("/health")->status, 200);
}

// The status line's code of a raw HTTP reply, or 0.
int status_of(const std::string& reply) {
  return reply.starts_with("HTTP/1.1 ") && reply.size() >= 12 ? std::stoi(reply.substr(9, 3)) : 0;
}

TEST(ServeHttp, NumbersBeyondDoubleAndRepeatedKeysAreMalformedJson) {
  TempDir dir;
  TestServer server(dir.path(), quick());
  server.wait_ready();
  auto client = server.client();
  // nlohmann's out_of_range, not a parse error: was a 500 "internal error".
  for (const char* body : {R"({"q": "a b", "x": 1e400})", R"({"q": "a b", "x": -1e400})",
                           R"({"q": "a b", "beam_size": 1e400})"})
    expect_error(post_json(client, "/translate", body), 400, "malformed JSON: ");
  expect_error(post_json(client, "/translator/translate", R"([{"src": "a", "id": 1e999}])"), 400,
               "malformed JSON: ");
  // The last of repeated keys was taken silently.
  expect_error(post_json(client, "/translate", R"({"q": "a b", "q": "c d"})"), 400,
               "the key \"q\" is given twice in one object");
  expect_error(post_json(client, "/translator/translate", R"([{"src": "a", "src": "b"}])"), 400,
               "the key \"src\" is given twice");
  // The same key in two objects is no repetition.
  EXPECT_EQ(post_json(client, "/translator/translate", R"([{"src": "a"}, {"src": "b"}])")->status,
            200);
}

TEST(ServeHttp, ModelsShowNoPathsWithoutTheApiKey) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.server.api_key = "s3cret";
  TestServer server(dir.path(), settings);
  server.wait_ready();
  auto client = server.client();
  auto anonymous = client.Get("/models");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 200);
  EXPECT_EQ(json::parse(anonymous->body), json::parse(R"([{"name": "tiny"}, {"name": "other"}])"));
  EXPECT_EQ(anonymous->body.find(dir.path().string()), std::string::npos);
  const json full = body_of(client.Get("/models", {{"Authorization", "Bearer s3cret"}}));
  ASSERT_EQ(full.size(), 2u);
  EXPECT_TRUE(full[0]["dir"].get<std::string>().starts_with((dir.path() / "a").string()))
      << full[0]["dir"];
  EXPECT_EQ(full[0]["layers"], 2);
}

TEST(ServeHttp, AmbiguousOrImpossibleHeadersAreRefusedAtOnce) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.server.io_timeout = 10s;  // a refusal that waited for the body would take this long
  settings.server.max_body_bytes = 1000;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  const std::string body = json{{"q", "a b"}}.dump();
  const std::string head =
      "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  const auto start = serve::Clock::now();
  auto refused = [&](const std::string& headers, int status, const std::string& part) {
    const std::string reply = http_exchange(server.port(), head + headers + "\r\n" + body);
    EXPECT_EQ(status_of(reply), status) << headers << reply;
    EXPECT_NE(reply.find(part), std::string::npos) << headers << reply;
    EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
  };
  refused(fmt::format("Content-Length: {}\r\nContent-Length: 3\r\n", body.size()), 400,
          "two different Content-Length headers");
  refused(std::string("X-Note: a") + '\0' + "b\r\n" +
              fmt::format("Content-Length: {}\r\n", body.size()),
          400, "control character (byte 0x00)");
  refused("Content-Length: -5\r\n", 400, "Content-Length '-5' is not a number of bytes");
  refused("Content-Length: 1e20\r\n", 400, "Content-Length '1e20' is not a number of bytes");
  refused("Content-Length: 100000000000000000000\r\n", 413,
          "request body larger than the maximum 1000 bytes");
  refused("Content-Length: 1001\r\n", 413, "request body larger than the maximum 1000 bytes");
  refused(fmt::format("Content-Length: {}\r\nTransfer-Encoding: chunked\r\n", body.size()), 400,
          "both Content-Length and Transfer-Encoding");
  refused(std::string(70000, 'x') + ": y\r\n", 431, "request headers longer than the maximum");
  refused("X-Length: none\r\n", 411, "a request body needs a Content-Length");
  EXPECT_LT(serve::Clock::now() - start, 5s);
  // The same Content-Length twice is no conflict.
  const std::string twice =
      fmt::format("Content-Length: {}\r\nContent-Length: {}\r\n\r\n", body.size(), body.size());
  EXPECT_EQ(status_of(http_exchange(server.port(), head + twice + body)), 200);
  auto client = server.client();
  const std::string counted = "tfm_http_requests_total{code=\"400\",endpoint=\"/translate\"} 5";
  const std::string metrics = metrics_with(client, counted);
  EXPECT_NE(metrics.find(counted), std::string::npos) << metrics;
}

TEST(ServeHttp, SlowClientsDoNotBlockHealthAndAreCutAtTheDeadline) {
  TempDir dir;
  ServeSettings settings = quick();
  settings.server.http_threads = 2;  // fewer threads than slow clients
  settings.server.io_timeout = 1s;
  TestServer server(dir.path(), settings);
  server.wait_ready();
  // Six clients send a request a byte at a time, one byte every 50 ms: every read succeeds, the
  // whole request would take 6 s.
  const std::string request =
      "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 20\r\n\r\n{\"q\": \"a b c d e f\"}" +
      std::string(60, ' ');
  std::vector<int> slow;
  for (int i = 0; i < 6; ++i) slow.push_back(connect_to(server.port()));
  for (int sock : slow) ASSERT_GE(sock, 0);
  std::vector<std::string> replies(slow.size());
  std::vector<serve::Clock::duration> cut(slow.size());
  const auto start = serve::Clock::now();
  std::vector<std::thread> senders;
  for (size_t i = 0; i < slow.size(); ++i)
    senders.emplace_back([&, i] {
      char first = 0;
      for (char byte : request) {
        if (::recv(slow[i], &first, 1, MSG_PEEK | MSG_DONTWAIT) == 1) break;  // the answer
        if (::send(slow[i], &byte, 1, MSG_NOSIGNAL) != 1) break;
        std::this_thread::sleep_for(50ms);
      }
      cut[i] = serve::Clock::now() - start;
      replies[i] = read_until_closed(slow[i], 5s);
    });
  // Meanwhile /health is answered at once, again and again.
  std::this_thread::sleep_for(200ms);
  auto client = server.client();
  client.set_read_timeout(1);
  for (int i = 0; i < 5; ++i) {
    const auto asked = serve::Clock::now();
    auto health = client.Get("/health");
    EXPECT_TRUE(health && health->status == 200) << "no answer to /health " << i;
    EXPECT_LT(serve::Clock::now() - asked, 500ms);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(post_json(client, "/translate", json{{"q", "a b"}}.dump())->status, 200);
  for (auto& t : senders) t.join();
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_EQ(status_of(replies[i]), 408) << replies[i];
    EXPECT_NE(replies[i].find("did not arrive whole within 1 s"), std::string::npos) << replies[i];
    EXPECT_LT(cut[i], 3s) << i;  // the deadline (1 s) and the sweep's granularity
    ::close(slow[i]);
  }
}

}  // namespace
}  // namespace tfm::internal::testing
