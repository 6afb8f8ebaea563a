#include "runtime/router/http/http_frontend_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "fmt/format.h"
#include "runtime/router/http/openai_api.h"
#include "runtime/router/routing/admission.h"

namespace lockstep::router {
namespace {

// Polls `sock` for `events` (POLLIN or POLLOUT) for at most `timeout`; true when
// ready. For POLLIN a hang-up counts as ready (the read then returns 0); for POLLOUT it
// does not (the peer is gone).
bool PollFor(int sock, short events, absl::Duration timeout) {
  pollfd fd{.fd = sock, .events = events, .revents = 0};
  // Rounded up: poll counts whole milliseconds, and a wait that ends before `timeout`
  // would let the caller see a timed-out read still inside its deadline.
  const int64_t ms = std::max<int64_t>(
      0, absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
  int ready;
  do {
    ready = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) return false;
  if (events == POLLOUT) return (fd.revents & (POLLERR | POLLHUP)) == 0;
  return (fd.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

// Reads and drops what the client still sends (at most 256 KiB, 500 ms) after the
// response to a refused request, so that closing does not reset the connection before
// the client has read the response. A TLS connection's close_notify goes first.
void DrainBeforeClose(int sock, security::TlsSession* tls) {
  if (tls != nullptr) tls->Close();
  ::shutdown(sock, SHUT_WR);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(500);
  std::array<char, 16384> scratch;
  for (int64_t drained = 0; drained < (256 << 10);) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration() || !PollFor(sock, POLLIN, left)) return;
    const ssize_t n = ::recv(sock, scratch.data(), scratch.size(), MSG_DONTWAIT);
    if (n <= 0) return;
    drained += n;
  }
}

int64_t MaxConnections(const HttpServerLimits& limits) {
  return limits.max_connections > 0 ? limits.max_connections : 4 * int64_t{limits.threads};
}

// Set on the accepting thread while it refuses a connection over the limit.
thread_local bool refusing_connection = false;

// The 503 a connection over the limit gets before it is closed.
std::string RefusalResponse(int64_t max_connections) {
  const std::string body = ErrorBody(absl::UnavailableError(fmt::format(
      "the router is at its limit of {} open connections (router.max_connections); retry "
      "later",
      max_connections)));
  return fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: "
      "{}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
      kAdmissionRetryAfterSeconds, body.size(), body);
}

// What a request that did not arrive within the read timeout is told (408).
std::string TimedOutBody(absl::Duration read_timeout) {
  return ErrorBody(absl::DeadlineExceededError(fmt::format(
      "the request head and body did not arrive within router.http_read_timeout_ms ({}) of "
      "its first byte",
      absl::ToInt64Milliseconds(read_timeout))));
}

// The 408 written when nothing of a response was (the request line timed out).
std::string TimedOutResponse(absl::Duration read_timeout) {
  const std::string body = TimedOutBody(read_timeout);
  return fmt::format(
      "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nConnection: "
      "close\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
}

// The plain-text answer to plain HTTP on the HTTPS port.
std::string PlainHttpRefusal() {
  const std::string body = ErrorBody(absl::InvalidArgumentError(
      "this port speaks HTTPS: send the request over TLS (https://)"));
  return fmt::format(
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: "
      "close\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
}

}  // namespace

// httplib's task queue with the connection limit: admitted connections go to a pool of
// `threads`; one over the limit is served (refused) on the accepting thread at once.
class BoundedHttpServer::ConnectionQueue : public httplib::TaskQueue {
 public:
  ConnectionQueue(BoundedHttpServer& server, int threads, int64_t max_connections)
      : server_(server), pool_(threads), max_connections_(max_connections) {}

  void enqueue(std::function<void()> fn) override {
    if (server_.open_connections_.fetch_add(1) >= max_connections_) {
      server_.open_connections_.fetch_sub(1);
      server_.refused_connections_.fetch_add(1);
      refusing_connection = true;
      fn();
      refusing_connection = false;
      return;
    }
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      server_.open_connections_.fetch_sub(1);
    });
  }

  void shutdown() override { pool_.shutdown(); }

 private:
  BoundedHttpServer& server_;
  httplib::ThreadPool pool_;
  const int64_t max_connections_;
};

// One connection's bytes, with the limits: a request's head and body must arrive
// within read_timeout of its first byte (one deadline for all their reads, however the
// bytes trickle in), the request head is bounded while it is read, the body ends at its
// Content-Length, and a write waits for at most write_timeout. The bytes are the
// socket's, or with `tls` the TLS session's over it. What the current request broke is
// kept for the handlers of this thread (`Current()`).
class BoundedHttpServer::ConnectionStream : public httplib::Stream {
 public:
  enum class Breach { kNone, kHeadTooLarge, kTimedOut, kClose };

  ConnectionStream(int sock, const HttpServerLimits& limits, security::TlsSession* tls)
      : sock_(sock), limits_(limits), tls_(tls) {
    current_ = this;
  }
  ~ConnectionStream() override { current_ = nullptr; }

  static ConnectionStream* Current() { return current_; }

  // A new request starts (its first byte has arrived or is buffered): its head is read
  // next, and it and the body must arrive within read_timeout.
  void BeginRequest() {
    deadline_ = absl::Now() + limits_.read_timeout;
    wrote_response_ = false;
    in_head_ = true;
    head_bytes_ = 0;
    head_lines_ = 0;
    body_left_ = 0;
    breach_ = Breach::kNone;
  }
  // The head is read; the body is `body_bytes` long.
  void EndHead(int64_t body_bytes) {
    in_head_ = false;
    body_left_ = body_bytes;
  }
  void set_breach(Breach breach) { breach_ = breach; }
  Breach breach() const { return breach_; }
  // Whether a byte of the current request's response was written.
  bool wrote_response() const { return wrote_response_; }

  // Bytes of the next request already read from the socket (poll does not see them).
  bool HasBuffered() const { return buffered() > 0 || (tls_ != nullptr && tls_->HasPending()); }

  bool is_readable() const override {
    return HasBuffered() || PollFor(sock_, POLLIN, deadline_ - absl::Now());
  }
  bool is_writable() const override { return PollFor(sock_, POLLOUT, limits_.write_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    if (!in_head_) {
      // The body: never past its declared length (so a request without one has none).
      if (body_left_ <= 0) return 0;
      size = std::min<size_t>(size, static_cast<size_t>(body_left_));
    }
    if (buffered() == 0) {
      const ssize_t n = Receive(buffer_.data(), buffer_.size());
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, buffered());
    std::memcpy(ptr, buffer_.data() + begin_, n);
    begin_ += n;
    if (in_head_) {
      head_bytes_ += static_cast<int64_t>(n);
      head_lines_ += std::count(ptr, ptr + n, '\n');
      if (head_bytes_ > limits_.max_header_bytes || head_lines_ > limits_.max_header_count + 2) {
        breach_ = Breach::kHeadTooLarge;
        return -1;
      }
    } else {
      body_left_ -= static_cast<int64_t>(n);
    }
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    wrote_response_ = true;
    if (tls_ != nullptr) {
      return TlsIo([&](short* wait) { return tls_->Write(ptr, size, wait); },
                   absl::Now() + limits_.write_timeout);
    }
    if (!PollFor(sock_, POLLOUT, limits_.write_timeout)) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(::getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  size_t buffered() const { return end_ - begin_; }

  // What the connection delivers next, waiting for it until the request's deadline:
  // bytes, 0 when the client closed, -1 on an error or past the deadline (kTimedOut).
  // The deadline is checked before every read, so that bytes trickling in faster than
  // they are read (each read finds one waiting) cannot extend it.
  ssize_t Receive(char* data, size_t size) {
    if (absl::Now() >= deadline_) {
      breach_ = Breach::kTimedOut;
      return -1;
    }
    if (tls_ != nullptr) {
      bool timed_out = false;
      const ssize_t n =
          TlsIo([&](short* wait) { return tls_->Read(data, size, wait); }, deadline_, &timed_out);
      if (timed_out) breach_ = Breach::kTimedOut;
      return n;
    }
    if (!PollFor(sock_, POLLIN, deadline_ - absl::Now())) {
      breach_ = Breach::kTimedOut;
      return -1;
    }
    ssize_t n;
    do {
      n = ::recv(sock_, data, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  // Repeats a TLS read or write (`op`) until it moves bytes, fails, or `deadline`
  // passes while it waits for the socket (-1, and `*timed_out` set when given).
  template <typename Op>
  ssize_t TlsIo(Op op, absl::Time deadline, bool* timed_out = nullptr) const {
    for (;;) {
      short wait = 0;
      const ssize_t n = op(&wait);
      if (n >= 0 || wait == 0) return n;
      if (!PollFor(sock_, wait, deadline - absl::Now())) {
        if (timed_out != nullptr) *timed_out = true;
        return -1;
      }
    }
  }

  void Address(int (*name)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (name(sock_, reinterpret_cast<sockaddr*>(&address), &length) != 0) return;
    std::array<char, NI_MAXHOST> host{};
    std::array<char, NI_MAXSERV> service{};
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host.data(), host.size(),
                      service.data(), service.size(), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host.data();
      port = std::atoi(service.data());
    }
  }

  static thread_local ConnectionStream* current_;

  const int sock_;
  const HttpServerLimits& limits_;
  security::TlsSession* const tls_;  // null: plain HTTP; else owned by the caller
  std::array<char, 4096> buffer_{};
  size_t begin_ = 0;
  size_t end_ = 0;
  absl::Time deadline_ = absl::InfiniteFuture();  // of the current request's head and body
  bool wrote_response_ = false;
  bool in_head_ = true;
  int64_t head_bytes_ = 0;
  int64_t head_lines_ = 0;
  int64_t body_left_ = 0;
  Breach breach_ = Breach::kNone;
};

thread_local BoundedHttpServer::ConnectionStream* BoundedHttpServer::ConnectionStream::current_ =
    nullptr;

BoundedHttpServer::BoundedHttpServer(HttpServerLimits limits) : limits_(limits) {
  const int threads = limits_.threads;
  const int64_t max_connections = MaxConnections(limits_);
  new_task_queue = [this, threads, max_connections] {
    return new ConnectionQueue(*this, threads, max_connections);
  };
  // The kernel's timeouts on accepted sockets (httplib sets them) match ours.
  set_read_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(limits_.read_timeout)));
  set_write_timeout(std::chrono::microseconds(absl::ToInt64Microseconds(limits_.write_timeout)));
  set_keep_alive_timeout(std::max<time_t>(1, absl::ToInt64Seconds(limits_.idle_timeout)));
  set_keep_alive_max_count(1000);
  set_payload_max_length(static_cast<size_t>(limits_.max_body_bytes));
  set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) { return PreRouting(req, res); });
  set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    const ConnectionStream* stream = ConnectionStream::Current();
    if (stream != nullptr && stream->breach() != ConnectionStream::Breach::kNone) {
      res.headers.erase("Keep-Alive");
      res.set_header("Connection", "close");
    }
  });
  // `Expect: 100-continue`: what the pre-routing checks refuse (413 for a declared body
  // over the limit, 411, 415) is answered before the client sends the body.
  set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    return PreRouting(req, res) == HandlerResponse::Handled ? res.status : 100;
  });
  set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    ConnectionStream* stream = ConnectionStream::Current();
    if (stream != nullptr && stream->breach() == ConnectionStream::Breach::kTimedOut) {
      res.status = 408;
      res.set_content(TimedOutBody(limits_.read_timeout), "application/json");
      return;
    }
    if (stream != nullptr && stream->breach() == ConnectionStream::Breach::kHeadTooLarge) {
      res.status = 431;
      res.set_content(ErrorBody(absl::InvalidArgumentError(fmt::format(
                          "the request head exceeds router.max_header_bytes ({}) or "
                          "router.max_header_count ({})",
                          limits_.max_header_bytes, limits_.max_header_count))),
                      "application/json");
      return;
    }
    if (res.status == 413 && res.body.empty()) {
      res.set_content(ErrorBody(absl::InvalidArgumentError(
                          fmt::format("the request body exceeds router.max_request_body_bytes ({})",
                                      limits_.max_body_bytes))),
                      "application/json");
      return;
    }
    if (fallback_error_handler_) fallback_error_handler_(req, res);
  });
}

BoundedHttpServer::HandlerResponse BoundedHttpServer::PreRouting(const httplib::Request& req,
                                                                 httplib::Response& res) {
  ConnectionStream* stream = ConnectionStream::Current();
  const auto refuse = [&](int status, const std::string& message) {
    if (stream != nullptr) stream->set_breach(ConnectionStream::Breach::kClose);
    res.status = status;
    res.set_content(ErrorBody(absl::InvalidArgumentError(message)), "application/json");
    return HandlerResponse::Handled;
  };
  if (req.has_header("Transfer-Encoding")) {
    return refuse(411, "send the request body with Content-Length, not Transfer-Encoding");
  }
  const std::string encoding = absl::AsciiStrToLower(req.get_header_value("Content-Encoding"));
  if (!encoding.empty() && encoding != "identity") {
    return refuse(415, fmt::format("Content-Encoding '{}' is not accepted; send the body as is",
                                   encoding));
  }
  int64_t length = 0;
  if (req.has_header("Content-Length")) {
    const std::string value = req.get_header_value("Content-Length");
    if (value.empty() || value.size() > 18 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return refuse(400, "Content-Length is not a number");
    }
    length = std::stoll(value);
  }
  if (length > limits_.max_body_bytes) {
    return refuse(413, fmt::format("the request body ({} bytes) exceeds "
                                   "router.max_request_body_bytes ({})",
                                   length, limits_.max_body_bytes));
  }
  if (stream != nullptr) stream->EndHead(length);
  return HandlerResponse::Unhandled;
}

int BoundedHttpServer::CurrentSocket() {
  const ConnectionStream* stream = ConnectionStream::Current();
  return stream != nullptr ? stream->socket() : -1;
}

bool BoundedHttpServer::ClientLeft(int sock) {
  pollfd fd{.fd = sock, .events = POLLRDHUP, .revents = 0};
  int ready;
  do {
    ready = ::poll(&fd, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (fd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

int BoundedHttpServer::Bind(const std::string& host, int port) {
  if (port == 0) {
    port = bind_to_any_port(host);
  } else if (!bind_to_port(host, port)) {
    port = -1;
  }
  // httplib listens with a backlog of 5: a burst of clients would see dropped SYNs
  // (retried after a second) before the connection limit could answer them.
  if (port > 0) ::listen(svr_sock_, kListenBacklog);
  return port;
}

std::unique_ptr<security::TlsSession> BoundedHttpServer::AcceptTls(socket_t sock) {
  const absl::Time deadline = absl::Now() + limits_.read_timeout;
  ::fcntl(sock, F_SETFL, ::fcntl(sock, F_GETFL) | O_NONBLOCK);
  // Every wait is checked in slices, so that stop() is not held up by a slow client.
  const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  bool readable = false;
  for (absl::Duration left = limits_.read_timeout; !readable && !stopping() &&
                                                   left > absl::ZeroDuration();
       left = deadline - absl::Now()) {
    readable = PollFor(sock, POLLIN, std::min(left, absl::Milliseconds(100)));
  }
  // A TLS connection opens with a handshake record (type 0x16); plain HTTP with a method.
  char first = 0;
  if (!readable || ::recv(sock, &first, 1, MSG_PEEK) != 1) {
    failed_handshakes_.fetch_add(1);
    return nullptr;
  }
  if (first != 0x16) {
    failed_handshakes_.fetch_add(1);
    if (absl::ascii_isupper(static_cast<unsigned char>(first))) {
      const std::string refusal = PlainHttpRefusal();
      (void)::send(sock, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      DrainBeforeClose(sock, nullptr);
    }
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<security::TlsSession>> session =
      security::TlsSession::Server(*tls_context_, sock);
  if (!session.ok() || !security::CompleteHandshake(**session, deadline, stopping).ok()) {
    failed_handshakes_.fetch_add(1);
    return nullptr;
  }
  return *std::move(session);
}

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  if (refusing_connection) {
    // Over the connection limit: nothing is read; the refusal fits any send buffer.
    // (Over HTTPS it would need a handshake first: the connection is just closed.)
    if (tls_context_ == nullptr) {
      const std::string refusal = RefusalResponse(MaxConnections(limits_));
      (void)::send(sock, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return false;
  }
  std::unique_ptr<security::TlsSession> tls;
  if (tls_context_ != nullptr && (tls = AcceptTls(sock)) == nullptr) {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return false;
  }
  bool ok = false;
  {
    ConnectionStream stream(sock, limits_, tls.get());
    // Idle between requests: wait for the next one's first byte in slices, so that
    // stop() is not held up by idle connections.
    const auto next_request = [&] {
      const absl::Time deadline = absl::Now() + limits_.idle_timeout;
      while (svr_sock_ != INVALID_SOCKET) {
        if (stream.HasBuffered()) return true;
        const absl::Duration left = deadline - absl::Now();
        if (left <= absl::ZeroDuration()) return false;
        if (PollFor(sock, POLLIN, std::min(left, absl::Milliseconds(100)))) return true;
      }
      return false;
    };
    for (size_t served = 0; served < keep_alive_max_count_ && next_request(); ++served) {
      stream.BeginRequest();
      bool connection_closed = false;
      ok = process_request(stream, served + 1 == keep_alive_max_count_, connection_closed,
                           nullptr);
      if (stream.breach() == ConnectionStream::Breach::kTimedOut && !stream.wrote_response()) {
        // The request line timed out: httplib wrote nothing.
        const std::string timed_out = TimedOutResponse(limits_.read_timeout);
        (void)stream.write(timed_out.data(), timed_out.size());
      }
      if (stream.breach() != ConnectionStream::Breach::kNone) {
        DrainBeforeClose(sock, tls.get());
        break;
      }
      if (!ok || connection_closed) break;
    }
  }
  if (tls != nullptr) tls->Close();
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace lockstep::router
