#include "tfm/serve/http_server.h"

#include <httplib.h>
#include <poll.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "tfm/core/error.h"
#include "tfm/serve/connections.h"
#include "tfm/serve/json_api.h"
#include "tfm/serve/request_error.h"

namespace tfm::internal::serve {

namespace {

using nlohmann::json;

void answer_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void answer_error(httplib::Response& res, int status, const std::string& message,
                  int retry_after = 0) {
  res.status = status;
  if (retry_after > 0) res.set_header("Retry-After", std::to_string(retry_after));
  res.set_content(error_body(message), "application/json");
}

// Runs a handler's work; whatever it throws becomes an answer: a RequestError its status, any
// other error a 500 naming it (and a line on stderr), so that no request can end the process.
template <typename Work>
void guarded(httplib::Response& res, Work&& work) {
  try {
    work();
  } catch (const RequestError& e) {
    answer_error(res, e.status(), e.what(), e.retry_after_seconds());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tfm serve: internal error: %s\n", e.what());
    answer_error(res, 500, std::string("internal error: ") + e.what());
  }
}

// Compares in time independent of where the strings differ (a key guessed byte by byte learns
// nothing from the answer's delay).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// The API key a request's headers carry: "Authorization: Bearer KEY" or "X-API-Key: KEY".
std::string header_key(const httplib::Request& req) {
  const std::string bearer = "Bearer ";
  const std::string authorization = req.get_header_value("Authorization");
  if (authorization.starts_with(bearer)) return authorization.substr(bearer.size());
  return req.get_header_value("X-API-Key");
}

// The endpoint label of a path for the metrics: the known ones, "other" for the rest (a client
// must not be able to add labels at will).
std::string endpoint_label(const std::string& path) {
  for (const char* known :
       {"/translate", "/translator/translate", "/health", "/metrics", "/models"})
    if (path == known) return known;
  return "other";
}

// Connections waiting to be accepted. Debian's cpp-httplib listens with a backlog of 5, fixed when
// it was compiled: a burst of clients connecting at once (64 from a load balancer's pool) would
// overflow it, and the dropped connections' requests wait for TCP's retransmits (1 s, 3 s ...).
constexpr int kListenBacklog = 1024;

// The request line and headers of one request at most; longer: 431.
constexpr size_t kMaxHeaderBytes = 65536;

// SO_REUSEADDR (a restarted server binds at once, past connections in TIME_WAIT) but not
// httplib's SO_REUSEPORT, with which a second server on the same port would start without an
// error and take half of the first one's connections.
void reuse_address_only(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

thread_local Clock::time_point request_start;
thread_local const httplib::Request* request_started = nullptr;

}  // namespace

// httplib's server with its listening socket in reach, to widen the backlog after binding
// (listen() again on a listening socket sets its backlog on Linux; the kernel caps it at
// net.core.somaxconn).
//
// It gives every accepted socket to the Connections (connections.h), which read each request whole
// before a handler thread answers it with httplib's parser and routes (serve()): httplib's own
// threads only accept.
class HttpServer::Listener : public httplib::Server {
 public:
  std::unique_ptr<Connections> connections;

  void widen_backlog() { ::listen(svr_sock_, kListenBacklog); }

  // Waits, at most `most`, until no connection waits in the listening socket's queue: at a stop,
  // those the kernel completed are accepted and answered rather than reset by the close.
  void accept_waiting(std::chrono::milliseconds most) {
    const auto deadline = Clock::now() + most;
    while (Clock::now() < deadline) {
      const socket_t sock = svr_sock_;
      pollfd fd{sock, POLLIN, 0};
      if (sock == INVALID_SOCKET || ::poll(&fd, 1, 0) <= 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // Answers the request at the start of the connection's buffer; whether the connection stays
  // open (not when `close`: the server is stopping).
  bool serve(Connection& connection, bool close, std::chrono::milliseconds write_timeout) {
    ConnectionStream stream(connection, write_timeout);
    bool closed = false;
    const bool ok = process_request(stream, close, closed, nullptr);
    return ok && !closed && !close;
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    connections->add(sock);
    return true;
  }
};

HttpServer::HttpServer(ServerOptions options, Loader load)
    : options_(std::move(options)), load_(std::move(load)), http_(new Listener) {
  TFM_CHECK(options_.http_threads >= 1, "--http-threads must be at least 1, not {}",
            options_.http_threads);
  // A client that closes its connection before its answer is written must not end the process.
  // cpp-httplib checks that a connection is alive before it writes, but writes with send(2) flags
  // 0: a reset arriving between the check and the write raises SIGPIPE, whose default action is to
  // terminate. Ignored, the write fails with EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
  Connections::Options connection_options;
  connection_options.io_timeout = options_.io_timeout;
  connection_options.keep_alive = options_.keep_alive;
  connection_options.max_header_bytes = kMaxHeaderBytes;
  connection_options.max_body_bytes = options_.max_body_bytes;
  connection_options.threads = options_.http_threads;
  const auto write_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.io_timeout);
  http_->connections = std::make_unique<Connections>(
      connection_options,
      [this, write_timeout](Connection& connection) {
        return http_->serve(connection, stopping_.load(), write_timeout);
      },
      [this](const std::string& path, int status) {
        metrics_.request(endpoint_label(path), status, 0.0);
      });
  // httplib's threads only hand the accepted sockets over.
  http_->new_task_queue = [] { return new httplib::ThreadPool(1); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);  // answers are small: no Nagle delay
  http_->set_socket_options(reuse_address_only);
  routes();
}

HttpServer::~HttpServer() {
  stop();
  if (loader_.joinable()) loader_.join();
}

int HttpServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    TFM_CHECK(port > 0, "cannot listen on {} (any port)", options_.host);
  } else {
    TFM_CHECK(http_->bind_to_port(options_.host, port),
              "cannot listen on {}:{} (in use, or not an address of this machine)", options_.host,
              port);
  }
  http_->widen_backlog();
  return port;
}

const TranslationService& HttpServer::service() const {
  if (!ready_.load(std::memory_order_acquire))
    throw RequestError(503, "the models are still loading", 1);
  return *service_;
}

bool HttpServer::authorized(const std::string& header, const std::string& body) const {
  if (options_.api_key.empty()) return true;
  return same_secret(header, options_.api_key) || same_secret(body, options_.api_key);
}

void HttpServer::routes() {
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    request_start = Clock::now();
    request_started = &req;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const double seconds = request_started == &req
                               ? std::chrono::duration<double>(Clock::now() - request_start).count()
                               : 0.0;
    request_started = nullptr;
    metrics_.request(endpoint_label(req.path), res.status, seconds);
  });
  // Every error answer without a body of its own (httplib's 404, 413, 400 for a malformed
  // request line ...) gets a JSON one.
  const size_t max_body = options_.max_body_bytes;
  http_->set_error_handler(httplib::Server::HandlerWithResponse(
      [max_body](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = fmt::format("HTTP error {}", res.status);
        if (res.status == 400) message = "malformed HTTP request";
        if (res.status == 404)
          message = fmt::format("no such endpoint: {} {}", req.method, req.path);
        if (res.status == 413)
          message = fmt::format("request body larger than the maximum {} bytes (a form's: 8192)",
                                max_body);
        res.set_content(error_body(message), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        std::fprintf(stderr, "tfm serve: internal error: %s\n", what.c_str());
        answer_error(res, 500, "internal error: " + what);
      });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_.load(std::memory_order_acquire)) {
      answer_json(res, {{"status", "loading"}}, 503);
      res.set_header("Retry-After", "1");
      return;
    }
    answer_json(res, {{"status", "ready"},
                      {"models", service_->model_names()},
                      {"queued_sentences", service_->queued_sentences()}});
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const int64_t queued =
        ready_.load(std::memory_order_acquire) ? service_->queued_sentences() : 0;
    res.set_content(metrics_.text(queued), "text/plain; version=0.0.4");
  });
  http_->Get("/models", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const TranslationService& service = this->service();
      // Without the API key (when one is set), the names alone: where the models lie on the
      // server's disk is not for anyone who can reach the port.
      const bool full = authorized(header_key(req), "");
      json models = json::array();
      for (const std::string& name : service.model_names()) {
        if (!full) {
          models.push_back({{"name", name}});
          continue;
        }
        const ServedModel& m = service.model(name);
        models.push_back({{"name", name},
                          {"dir", m.dir.string()},
                          {"layers", m.model->config().layers},
                          {"decoder_layers", m.model->config().decoder_depth()},
                          {"d_model", m.model->config().d_model},
                          {"vocab_size", m.model->config().vocab_size},
                          {"precision", decode::precision_name(m.model->options())}});
      }
      answer_json(res, models);
    });
  });
  http_->Post("/translate", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      const bool form =
          req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded");
      const LibreTranslateRequest request =
          form ? parse_libretranslate_form(req.params) : parse_libretranslate(req.body);
      if (!authorized(header_key(req), request.api_key))
        throw RequestError(401,
                           "a valid API key is needed (\"api_key\" or an Authorization: "
                           "Bearer header)");
      answer_json(res, libretranslate_response(request, service().translate(request.request)));
    });
  });
  http_->Post("/translator/translate", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      if (!authorized(header_key(req), ""))
        throw RequestError(401, "a valid API key is needed (an Authorization: Bearer header)");
      const OpenNmtRequest request = parse_opennmt(req.body);
      const TranslationService& service = this->service();
      if (static_cast<int64_t>(request.sources.size()) > service.limits().max_sentences)
        throw request_error(400, "{} sentences in one request, more than the maximum {}",
                            request.sources.size(), service.limits().max_sentences);
      // One translation per model named, each with its sentences in order.
      TranslationResult result(request.sources.size());
      std::vector<std::string> done;
      for (size_t i = 0; i < request.sources.size(); ++i) {
        const std::string& model = request.models[i];
        if (std::find(done.begin(), done.end(), model) != done.end()) continue;
        done.push_back(model);
        TranslationRequest part;
        part.model = model;
        std::vector<size_t> places;
        for (size_t j = i; j < request.sources.size(); ++j) {
          if (request.models[j] != model) continue;
          part.sentences.push_back(request.sources[j]);
          places.push_back(j);
        }
        TranslationResult translated = service.translate(part);
        for (size_t k = 0; k < places.size(); ++k) result[places[k]] = std::move(translated[k]);
      }
      answer_json(res, opennmt_response(request, result));
    });
  });
}

void HttpServer::load() {
  try {
    service_ = load_(metrics_);
    ready_.store(true, std::memory_order_release);
    metrics_.set_ready(true);
  } catch (...) {
    {
      std::lock_guard lock(load_error_mutex_);
      load_error_ = std::current_exception();
    }
    stop();
  }
}

void HttpServer::run() {
  loader_ = std::thread([this] { load(); });
  listening_ = true;
  if (!stopping_) http_->listen_after_bind();  // returns once stop() and the requests are done
  listening_ = false;
  http_->connections->stop();
  http_->connections->drain();  // every request begun is answered
  loader_.join();
  if (service_) service_->stop();  // every request has its answer: the queues are empty
  std::lock_guard lock(load_error_mutex_);
  if (load_error_) std::rethrow_exception(load_error_);
}

void HttpServer::stop() {
  stopping_ = true;
  // run() may be between its check of stopping_ and listening: wait until httplib runs.
  while (listening_ && !http_->is_running())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (listening_) http_->accept_waiting(std::chrono::seconds(1));
  http_->connections->stop();  // idle connections close; requests begun are still answered
  http_->stop();
}

}  // namespace tfm::internal::serve
