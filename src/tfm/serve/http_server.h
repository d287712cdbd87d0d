// tfm serve's HTTP side (cpp-httplib's parser and routes over connections.h's connections): the
// endpoints, the limits against slow or greedy clients, the optional API key, and a stop that
// answers every request begun. Its threads only parse,
// check, queue and wait: the TranslationService's workers decode.
//   POST /translate             LibreTranslate's shape (json_api.h), JSON or a form
//   POST /translator/translate  OpenNMT-py's REST shape
//   GET  /health                200 {"status": "ready", ...} once the models are loaded, 503 before
//   GET  /metrics               Prometheus text format (metrics.h)
//   GET  /models                the served models and their configurations
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tfm/serve/metrics.h"
#include "tfm/serve/translation_service.h"

namespace tfm::internal::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (bind() says which)
  size_t max_body_bytes = 1 << 20;      // larger bodies: 413
  std::chrono::seconds io_timeout{10};  // a whole request's arrival (from its first byte): 408
                                        // beyond; writing an answer
  std::chrono::seconds keep_alive{5};   // an idle connection is closed after this
  int http_threads = 128;               // requests answered at once (connections.h)
  std::string api_key;                  // non-empty: /translate* need it (401 otherwise)
};

class HttpServer {
 public:
  // Builds the service once the server listens: the models load while /health says 503.
  using Loader = std::function<std::unique_ptr<TranslationService>(Metrics& metrics)>;

  HttpServer(ServerOptions options, Loader load);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket (an error naming the address if it cannot) and returns the port.
  int bind();
  // Loads the models in the background and serves until stop(); then lets the requests in flight
  // finish, drains the queues and returns. Rethrows an error of the loading.
  void run();
  // From any thread (a signal's): stops accepting, lets run() finish the requests in flight.
  void stop();

  bool ready() const { return ready_.load(); }
  Metrics& metrics() { return metrics_; }

 private:
  class Listener;
  void routes();
  void load();
  // The service once loaded; a RequestError 503 before.
  const TranslationService& service() const;
  bool authorized(const std::string& header_key, const std::string& body_key) const;

  ServerOptions options_;
  Loader load_;
  Metrics metrics_;
  std::unique_ptr<Listener> http_;
  std::unique_ptr<TranslationService> service_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> listening_{false};
  std::thread loader_;
  std::mutex load_error_mutex_;
  std::exception_ptr load_error_;
};

}  // namespace tfm::internal::serve
