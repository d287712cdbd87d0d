// tfm serve's connections. A reader thread holds every open connection (epoll) until a whole
// request has arrived (request_framing.h), and only then gives it to one of the handler threads,
// which answers it and hands the connection back for its next request. So a slow or silent client
// holds no thread: /health is answered however many of them wait. Each request has bounds of its
// own, not per read:
//   keep_alive  a connection with no byte of a next request is closed after it
//   io_timeout  a request must arrive whole (headers and body) within it from its first byte, else
//               408 and the connection is closed; an answer must be written within it
// Stopping: the caller stops accepting; idle connections are closed; every request already begun
// is still read (within its deadline) and answered; then drain() returns.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tfm/serve/batching_queue.h"

namespace tfm::internal::serve {

struct Connection {
  enum class Phase { kIdle, kReading, kHandling, kLingering };
  int sock = -1;
  std::string buffer;   // bytes read and not yet given to the request parser
  size_t consumed = 0;  // of buffer: given to the parser
  Phase phase = Phase::kIdle;
  Clock::time_point deadline;  // of the phase (kReading: the whole request's)
  bool continue_sent = false;  // "100 Continue" written for the request being read
};

// httplib's view of a connection while a handler answers its request: reads take the buffered
// bytes first, then wait on the socket until the request's deadline (a chunked body); the answer's
// writes until io_timeout after the first.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(Connection& connection, std::chrono::milliseconds write_timeout)
      : connection_(connection), write_timeout_(write_timeout) {}
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return connection_.sock; }

 private:
  Connection& connection_;
  std::chrono::milliseconds write_timeout_;
  Clock::time_point write_deadline_{};
};

class Connections {
 public:
  struct Options {
    std::chrono::milliseconds io_timeout{10000};
    std::chrono::milliseconds keep_alive{5000};
    size_t max_header_bytes = 16384;
    size_t max_body_bytes = 1 << 20;
    int threads = 128;  // handler threads: requests answered at once
  };
  // Answers the request at the start of the connection's buffer; returns whether the connection
  // stays open for another request. Runs on a handler thread.
  using Serve = std::function<bool(Connection&)>;
  // Told of a request refused before a handler saw it (its answer is written), for the metrics.
  using Refused = std::function<void(const std::string& path, int status)>;

  Connections(Options options, Serve serve, Refused refused);
  ~Connections();
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  // Takes an accepted socket (from any thread); it is closed here.
  void add(int sock);
  // Closes the idle connections and every one that becomes idle; requests begun are answered.
  void stop();
  bool stopping() const { return stopping_.load(); }
  // After stop() and the last add(): returns once every connection is answered and closed.
  void drain();

 private:
  void loop();
  void wake();
  void take_new(Clock::time_point now);
  void take_returned(Clock::time_point now);
  void on_readable(int sock, Clock::time_point now);
  // Frames what has arrived: waits for more, refuses, or gives the request to a handler.
  void advance(Connection& c, Clock::time_point now);
  void refuse(Connection& c, int status, const std::string& message, const std::string& path,
              Clock::time_point now);
  void sweep(Clock::time_point now);
  void close(int sock);

  Options options_;
  Serve serve_;
  Refused refused_;
  int epoll_ = -1;
  int wake_ = -1;                                    // an eventfd that ends the reader's wait
  std::map<int, std::unique_ptr<Connection>> open_;  // the reader thread's alone
  std::mutex mutex_;                                 // guards the two hand-overs
  std::vector<int> new_;
  std::vector<std::pair<Connection*, bool>> returned_;  // from the handlers: keep open?
  std::atomic<bool> stopping_{false};
  std::atomic<bool> last_added_{false};
  std::unique_ptr<httplib::ThreadPool> handlers_;
  std::thread reader_;
};

}  // namespace tfm::internal::serve
