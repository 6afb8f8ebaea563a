// The router's HTTP listener with bounds (docs/security.md §5): cpp-httplib's server
// with its own connection loop, so that what a client can make the router hold is
// limited:
//
//  * connections: at most `max_connections` open at once, each served by a thread of
//    the pool of `threads` (those beyond wait for one); one more gets 503 (Retry-After)
//    written without reading anything, and is closed on the accepting thread, so it
//    never waits for a pool thread;
//  * the request head: over `max_header_bytes` or more than `max_header_count` lines,
//    431 and close, found while reading (nothing beyond the limit is buffered);
//  * the body: only with Content-Length (Transfer-Encoding: 411; Content-Encoding
//    other than identity: 415), at most `max_body_bytes` (413 before the body is read,
//    and with `Expect: 100-continue` instead of the 100, so the client never sends it);
//    reads never go past the declared length;
//  * time: a connection idle between requests for `idle_timeout` is closed; a
//    request's head and body must arrive within `read_timeout` of its first byte, one
//    deadline for all their reads (a client trickling bytes gets 408 and is closed, so
//    it holds a pool thread for at most that long); a response write that makes no
//    progress for `write_timeout` (a client that stopped reading its stream) fails,
//    which ends the connection (the frontend's sinks then cancel the request). None
//    applies to a response that is streaming to a client that reads it.
//
// With a TLS context (`set_tls`, before Bind) the listener speaks HTTPS: each admitted
// connection's TLS handshake runs on its pool thread within `read_timeout` (and the
// bytes go through the same bounded stream, so every bound above holds unchanged);
// plain HTTP sent to it gets a plain-text 400 that says to use https, and a failed
// handshake closes the connection (`failed_handshakes()`). A connection over the limit
// is closed at once without the 503: writing one would need a handshake, which the
// accepting thread does not wait for. (httplib::SSLServer would replace this loop.)
//
// Refusals carry an OpenAI error body (`ErrorBody`). The routes are httplib's; the
// owner must not replace the pre-routing, post-routing or error handlers set here (it
// can add its own error handling through `set_fallback_error_handler`).
//
// Thread safety: as httplib::Server; the counters are thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_SERVER_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "httplib.h"
#include "runtime/security/tls_session.h"

namespace lockstep::router {

struct HttpServerLimits {
  int threads = 64;
  int64_t max_connections = 0;  // 0: 4 * `threads`
  int64_t max_body_bytes = 16 << 20;
  int64_t max_header_bytes = 64 << 10;
  int64_t max_header_count = 100;
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
};

inline constexpr int kListenBacklog = 1024;

class BoundedHttpServer : public httplib::Server {
 public:
  explicit BoundedHttpServer(HttpServerLimits limits);

  // Binds `host`:`port` (0: a free port) with a listen backlog of kListenBacklog;
  // returns the port, or -1.
  int Bind(const std::string& host, int port);

  // HTTPS with `context` (a server's); before Bind.
  void set_tls(std::shared_ptr<const security::TlsContext> context) {
    tls_context_ = std::move(context);
  }

  // Called for error responses (status >= 400) the bounds did not produce.
  void set_fallback_error_handler(Handler handler) { fallback_error_handler_ = std::move(handler); }

  // The socket of the connection whose request this thread is handling (-1 outside a
  // handler); it stays open until the handler returns.
  static int CurrentSocket();
  // True when the client of `sock` has closed its side of the connection (or it
  // failed); reads nothing and does not wait. Any thread.
  static bool ClientLeft(int sock);

  int64_t open_connections() const { return open_connections_.load(); }
  int64_t refused_connections() const { return refused_connections_.load(); }
  // HTTPS connections that did not complete the TLS handshake (plain HTTP included).
  int64_t failed_handshakes() const { return failed_handshakes_.load(); }

 private:
  class ConnectionQueue;
  class ConnectionStream;

  // Serves one accepted connection (httplib calls it on a pool thread, or on the
  // accepting thread for a connection over the limit).
  bool process_and_close_socket(socket_t sock) override;
  HandlerResponse PreRouting(const httplib::Request& req, httplib::Response& res);
  // The TLS session of a new HTTPS connection, or null when it did not complete (then
  // the connection is to be closed).
  std::unique_ptr<security::TlsSession> AcceptTls(socket_t sock);

  const HttpServerLimits limits_;
  Handler fallback_error_handler_;
  std::atomic<int64_t> open_connections_{0};
  std::atomic<int64_t> refused_connections_{0};
  std::shared_ptr<const security::TlsContext> tls_context_;  // null: plain HTTP
  std::atomic<int64_t> failed_handshakes_{0};
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_HTTP_FRONTEND_SERVER_H_
