#include "tfm/serve/connections.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tfm/core/error.h"
#include "tfm/serve/json_api.h"
#include "tfm/serve/request_framing.h"

namespace tfm::internal::serve {

namespace {

// How long a refused request's connection is read (and the bytes dropped) after its answer, so that
// closing it with the client's unread bytes does not reset it before the answer is read.
constexpr auto kLinger = std::chrono::seconds(1);

// Waits until `sock` is ready for `events` or `deadline` passes.
bool wait_for(int sock, short events, Clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) return false;
    pollfd fd{sock, events, 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(left + 1, 1 << 30)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

// Whether bytes wait on a socket (to be read on the reader's next round).
bool waiting(int sock) {
  char byte = 0;
  return ::recv(sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

const char* reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

void address_of(int sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  const int got = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&address), &length)
                       : ::getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length);
  if (got != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

}  // namespace

bool ConnectionStream::is_readable() const {
  return connection_.consumed < connection_.buffer.size() ||
         wait_for(connection_.sock, POLLIN, connection_.deadline);
}

bool ConnectionStream::is_writable() const {
  const Clock::time_point deadline =
      write_deadline_ == Clock::time_point{} ? Clock::now() + write_timeout_ : write_deadline_;
  return wait_for(connection_.sock, POLLOUT, deadline);
}

ssize_t ConnectionStream::read(char* ptr, size_t size) {
  Connection& c = connection_;
  if (c.consumed < c.buffer.size()) {
    const size_t n = std::min(size, c.buffer.size() - c.consumed);
    std::copy_n(c.buffer.data() + c.consumed, n, ptr);
    c.consumed += n;
    return static_cast<ssize_t>(n);
  }
  while (wait_for(c.sock, POLLIN, c.deadline)) {
    const ssize_t got = ::recv(c.sock, ptr, size, MSG_DONTWAIT);
    if (got >= 0 || (errno != EAGAIN && errno != EINTR)) return got;
  }
  return -1;  // the request's deadline passed
}

ssize_t ConnectionStream::write(const char* ptr, size_t size) {
  if (write_deadline_ == Clock::time_point{}) write_deadline_ = Clock::now() + write_timeout_;
  while (wait_for(connection_.sock, POLLOUT, write_deadline_)) {
    const ssize_t sent = ::send(connection_.sock, ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent >= 0 || (errno != EAGAIN && errno != EINTR)) return sent;
  }
  return -1;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  address_of(connection_.sock, true, ip, port);
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  address_of(connection_.sock, false, ip, port);
}

Connections::Connections(Options options, Serve serve, Refused refused)
    : options_(options), serve_(std::move(serve)), refused_(std::move(refused)) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  TFM_CHECK(epoll_ >= 0 && wake_ >= 0, "tfm serve: cannot create an epoll set or eventfd: {}",
            std::strerror(errno));
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_;
  ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
  handlers_ = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(options_.threads));
  reader_ = std::thread([this] { loop(); });
}

Connections::~Connections() {
  if (reader_.joinable()) {
    stop();
    drain();
  }
  ::close(wake_);
  ::close(epoll_);
}

void Connections::add(int sock) {
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  {
    std::lock_guard lock(mutex_);
    new_.push_back(sock);
  }
  wake();
}

void Connections::stop() {
  stopping_ = true;
  wake();
}

void Connections::drain() {
  last_added_ = true;
  wake();
  if (reader_.joinable()) reader_.join();
  handlers_->shutdown();  // every request is answered: the handlers are idle
}

void Connections::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_, &one, sizeof(one));
}

void Connections::loop() {
  std::vector<epoll_event> events(64);
  while (true) {
    const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 50);
    const Clock::time_point now = Clock::now();
    for (int i = 0; i < n; ++i) {
      if (events[static_cast<size_t>(i)].data.fd == wake_) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t got = ::read(wake_, &count, sizeof(count));
        continue;
      }
      on_readable(events[static_cast<size_t>(i)].data.fd, now);
    }
    take_returned(now);
    take_new(now);
    sweep(now);
    if (last_added_ && stopping_ && open_.empty()) {
      std::lock_guard lock(mutex_);
      if (new_.empty() && returned_.empty()) return;
    }
  }
}

void Connections::take_new(Clock::time_point now) {
  std::vector<int> socks;
  {
    std::lock_guard lock(mutex_);
    socks.swap(new_);
  }
  for (int sock : socks) {
    auto connection = std::make_unique<Connection>();
    connection->sock = sock;
    connection->deadline = now + options_.keep_alive;
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.fd = sock;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, sock, &event);
    open_[sock] = std::move(connection);
    on_readable(sock, now);  // its request is often there already (and stop() would close it)
  }
}

void Connections::take_returned(Clock::time_point now) {
  std::vector<std::pair<Connection*, bool>> returned;
  {
    std::lock_guard lock(mutex_);
    returned.swap(returned_);
  }
  for (auto [c, keep] : returned) {
    if (!keep) {
      close(c->sock);
      continue;
    }
    c->buffer.erase(0, c->consumed);  // a pipelined next request stays
    c->consumed = 0;
    c->continue_sent = false;
    c->phase = Connection::Phase::kIdle;
    c->deadline = now + options_.keep_alive;
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.fd = c->sock;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, c->sock, &event);
    advance(*c, now);
  }
}

void Connections::on_readable(int sock, Clock::time_point now) {
  const auto found = open_.find(sock);
  if (found == open_.end() || found->second->phase == Connection::Phase::kHandling) return;
  Connection& c = *found->second;
  // At most a whole request's bytes are kept: by then the request is complete or refused.
  const size_t most = options_.max_header_bytes + options_.max_body_bytes;
  bool ended = false;
  char chunk[16384];
  while (c.buffer.size() < most || c.phase == Connection::Phase::kLingering) {
    const ssize_t got = ::recv(sock, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (got > 0 && c.phase != Connection::Phase::kLingering)
      c.buffer.append(chunk, static_cast<size_t>(got));
    if (got > 0) continue;
    ended = got == 0 || (errno != EAGAIN && errno != EINTR);
    break;
  }
  if (c.phase != Connection::Phase::kLingering) advance(c, now);
  // The client closed (or half-closed) without a whole request, or after a refusal's answer.
  if (ended && c.phase != Connection::Phase::kHandling) close(sock);
}

void Connections::advance(Connection& c, Clock::time_point now) {
  if (c.buffer.empty()) return;
  if (c.phase == Connection::Phase::kIdle) {
    c.phase = Connection::Phase::kReading;  // the request's first byte: its deadline starts
    c.deadline = now + options_.io_timeout;
  }
  const RequestFrame frame =
      frame_request(c.buffer, options_.max_header_bytes, options_.max_body_bytes);
  if (frame.state == RequestFrame::State::kRefused) {
    refuse(c, frame.status, frame.message, frame.path, now);
    return;
  }
  if (frame.state == RequestFrame::State::kIncomplete) {
    if (frame.expect_continue && !c.continue_sent) {
      // The client sends its body after this (curl waits 1 s for it otherwise). httplib writes
      // one more before the answer; HTTP clients accept any number of 100s.
      const std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] const ssize_t sent =
          ::send(c.sock, interim.data(), interim.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      c.continue_sent = true;
    }
    return;
  }
  c.phase = Connection::Phase::kHandling;
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.sock, nullptr);
  Connection* connection = &c;
  handlers_->enqueue([this, connection] {
    bool keep = false;
    try {
      keep = serve_(*connection);
    } catch (...) {
      // httplib answers a handler's exceptions itself; nothing else may end the thread.
    }
    {
      std::lock_guard lock(mutex_);
      returned_.emplace_back(connection, keep);
    }
    wake();
  });
}

void Connections::refuse(Connection& c, int status, const std::string& message,
                         const std::string& path, Clock::time_point now) {
  const std::string body = error_body(message);
  const std::string answer = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Connection: close\r\n\r\n{}",
      status, reason(status), body.size(), body);
  // A new connection's send buffer is empty (an answered request's too): the answer fits.
  [[maybe_unused]] const ssize_t sent =
      ::send(c.sock, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(c.sock, SHUT_WR);
  c.phase = Connection::Phase::kLingering;
  c.deadline = now + kLinger;
  c.buffer.clear();
  c.consumed = 0;
  if (refused_) refused_(path, status);
}

void Connections::sweep(Clock::time_point now) {
  std::vector<int> closing;
  for (auto& [sock, connection] : open_) {
    Connection& c = *connection;
    if (c.phase == Connection::Phase::kHandling) continue;
    if (c.phase == Connection::Phase::kIdle &&
        (now >= c.deadline || (stopping_ && !waiting(sock)))) {
      closing.push_back(sock);
    } else if (c.phase == Connection::Phase::kLingering && now >= c.deadline) {
      closing.push_back(sock);
    } else if (c.phase == Connection::Phase::kReading && now >= c.deadline) {
      refuse(c, 408,
             fmt::format("the request did not arrive whole within {} s (--io-timeout)",
                         std::chrono::duration<double>(options_.io_timeout).count()),
             "", now);
    }
  }
  for (int sock : closing) close(sock);
}

void Connections::close(int sock) {
  ::epoll_ctl(epoll_, EPOLL_CTL_DEL, sock, nullptr);
  ::close(sock);
  open_.erase(sock);
}

}  // namespace tfm::internal::serve
