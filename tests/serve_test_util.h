// For the tests of tfm serve: an HttpServer over the tiny text model (text_model_test_util.h),
// running in a thread on a free loopback port, and the translations it should give.
#pragma once

#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "text_model_test_util.h"
#include "tfm/decode/inference_model.h"
#include "tfm/serve/http_server.h"

namespace tfm::internal::testing {

struct ServeSettings {
  serve::ServerOptions server;
  serve::QueueOptions queue;
  serve::RequestLimits limits;
  decode::TranslateOptions search;
  std::shared_future<void> loaded;  // when set, loading waits for it (to see /health say 503)
};

inline decode::TranslateOptions tiny_search() {
  decode::TranslateOptions search;
  search.max_length_offset = 8;  // a random model talks until the limit
  return search;
}

// A served tiny model: "tiny" (heads 2, seed 3) and, second, "other" (seed 5).
class TestServer {
 public:
  TestServer(const std::filesystem::path& dir, ServeSettings settings) : settings_(settings) {
    settings_.server.port = 0;
    std::filesystem::create_directories(dir / "a");
    std::filesystem::create_directories(dir / "b");
    models_.push_back(served("tiny", write_tiny_text_model(dir / "a", 2, 3)));
    models_.push_back(served("other", write_tiny_text_model(dir / "b", 2, 5)));
    server_ = std::make_unique<serve::HttpServer>(settings_.server, [this](serve::Metrics& m) {
      if (settings_.loaded.valid()) settings_.loaded.wait();
      return std::make_unique<serve::TranslationService>(models_, settings_.search, settings_.queue,
                                                         settings_.limits, &m);
    });
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~TestServer() { stop(); }

  void wait_ready() {
    for (int i = 0; i < 2000 && !server_->ready(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(server_->ready());
  }
  int port() const { return port_; }
  serve::HttpServer& server() { return *server_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60);
    return c;
  }
  // Stops and waits for run() to return.
  void stop() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
  }

  // What the model `index` translates `text` to, alone, with the service's search and `beam`.
  std::vector<decode::Hypothesis> expected(size_t index, const std::string& text, int64_t beam = 4,
                                           int64_t n_best = 1, bool attention = false) const {
    decode::TranslateOptions options = settings_.search;
    options.beam_size = beam;
    options.n_best = n_best;
    if (attention) options.attention = {models_[index].model->config().layers - 1, -1};
    return decode::translate(*models_[index].model, {models_[index].vocab->encode(text)}, options)
        .front();
  }
  std::string expected_text(size_t index, const std::string& text, int64_t beam = 4) const {
    return text.empty() ? "" : this->text(index, expected(index, text, beam).front().tokens);
  }
  std::string text(size_t index, const std::vector<int32_t>& tokens) const {
    return models_[index].vocab->decode(tokens);
  }
  // The subword pieces of a text, or of token ids.
  std::vector<std::string> pieces(size_t index, const std::string& text) const {
    return pieces(index, models_[index].vocab->encode(text));
  }
  std::vector<std::string> pieces(size_t index, const std::vector<int32_t>& tokens) const {
    std::vector<std::string> out;
    for (int32_t id : tokens) out.push_back(models_[index].vocab->piece(id));
    return out;
  }

 private:
  static serve::ServedModel served(const std::string& name, const std::filesystem::path& dir) {
    auto model = decode::load_inference_model(dir, {});
    auto vocab = std::make_shared<const data::Vocabulary>(dir / kVocabFileName);
    return {name, dir, std::move(model), std::move(vocab)};
  }

  ServeSettings settings_;
  std::vector<serve::ServedModel> models_;
  std::unique_ptr<serve::HttpServer> server_;
  int port_ = 0;
  std::thread thread_;
};

// POSTs a JSON body (or any text) to `path`.
inline httplib::Result post_json(httplib::Client& client, const std::string& path,
                                 const std::string& body) {
  return client.Post(path.c_str(), body, "application/json");
}

// A connection to a server on loopback, or -1.
inline int connect_to(int port) {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (sock >= 0 && ::connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(sock);
    return -1;
  }
  return sock;
}

// Everything the server sends on `sock` until it closes the connection or `wait` passes.
inline std::string read_until_closed(int sock, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::string got;
  char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    timeval tick{0, 100'000};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof(tick));
    const ssize_t n = ::recv(sock, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n > 0) got.append(buffer, static_cast<size_t>(n));
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
  }
  return got;
}

// Sends raw bytes on a new connection and returns the server's whole reply (until it closes).
inline std::string http_exchange(int port, const std::string& bytes,
                                 std::chrono::milliseconds wait = std::chrono::seconds(5)) {
  const int sock = connect_to(port);
  if (sock < 0) return "";
  [[maybe_unused]] const ssize_t sent = ::send(sock, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(sock, SHUT_WR);
  std::string reply = read_until_closed(sock, wait);
  ::close(sock);
  return reply;
}

}  // namespace tfm::internal::testing
