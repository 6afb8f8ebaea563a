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
//    other than identity: 415), at most `max_body_bytes` (413 before the body is read);
//    reads never go past the declared length;
//  * time: a connection idle between requests for `idle_timeout`, or a request whose
//    bytes stall for `read_timeout`, is closed; a response write that makes no progress
//    for `write_timeout` (a client that stopped reading its stream) fails, which ends
//    the connection (the frontend's sinks then cancel the request). None applies to a
//    response that is streaming to a client that reads it.
//
// Refusals carry an OpenAI error body (`ErrorBody`). The routes are httplib's; the
// owner must not replace the pre-routing, post-routing or error handlers set here (it
// can add its own error handling through `set_fallback_error_handler`).
//
// Thread safety: as httplib::Server; the counters are thread-safe.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_FRONTEND_SERVER_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_FRONTEND_SERVER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "httplib.h"

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

  // Called for error responses (status >= 400) the bounds did not produce.
  void set_fallback_error_handler(Handler handler) { fallback_error_handler_ = std::move(handler); }

  int64_t open_connections() const { return open_connections_.load(); }
  int64_t refused_connections() const { return refused_connections_.load(); }

 private:
  class ConnectionQueue;
  class ConnectionStream;

  // Serves one accepted connection (httplib calls it on a pool thread, or on the
  // accepting thread for a connection over the limit).
  bool process_and_close_socket(socket_t sock) override;
  HandlerResponse PreRouting(const httplib::Request& req, httplib::Response& res);

  const HttpServerLimits limits_;
  Handler fallback_error_handler_;
  std::atomic<int64_t> open_connections_{0};
  std::atomic<int64_t> refused_connections_{0};
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_FRONTEND_SERVER_H_
