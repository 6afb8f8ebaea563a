// AsyncHttpServer: an event-driven HTTP/1.1 server on Boost.Asio and Boost.Beast's
// parser. A few I/O threads serve every connection; no connection or request holds a
// thread while it waits. What a client can make the server hold is bounded:
//
//  * connections: at most `max_connections` open at once; one more is answered 503
//    (Retry-After) without reading anything, and closed;
//  * the request head: over `max_header_bytes` or more than `max_header_count` fields,
//    431 and close (the parser buffers nothing beyond the limit);
//  * the body: only with Content-Length (Transfer-Encoding: 411; a Content-Encoding
//    other than identity: 415), at most `max_body_bytes` (413 before the body is read;
//    `Expect: 100-continue` gets its 100 only for a body within the limit);
//  * time: a new connection whose first request does not begin within
//    `first_request_timeout` of its accept (over TLS: of its handshake) is closed, and so
//    is one idle between requests for `idle_timeout`. The first wait is separate and
//    longer by default: when thousands of clients connect at once, the kernel's accept
//    queue overflows and their requests arrive seconds after the accept (TCP
//    retransmits), though the clients sent them at once. A
//    request's head and body must arrive within `read_timeout` of its first byte, one
//    deadline for all their reads (408 and close); a response write (of at most 256 KiB)
//    that does not complete within `write_timeout` (a client that stopped reading)
//    cuts the connection and aborts its exchange (HttpExchange::OnAbort). A client that
//    closes its side while its response is pending aborts the exchange too.
//
// Each complete request goes to the handler (on an I/O thread: it must not block), as
// an HttpExchange answered from any thread. Refusals carry `error_body(status, message)`.
// With TLS (UseTls, before Start) the server speaks HTTPS only: a connection's first
// bytes must be a TLS handshake, completed within `read_timeout` (a silent connection is
// closed); plain HTTP gets a plain 400 that says to use https, anything else is closed;
// every bound above holds over TLS. A connection over the cap is closed at once (a 503
// would need a handshake first).
//
// Thread safety: thread-safe. Stop (or the destructor) closes every connection,
// aborting the exchanges not answered in full (one whose response is all queued is
// written first, within the write timeout), and joins the I/O threads.
#ifndef LOCKSTEP_RUNTIME_ASYNC_HTTP_ASYNC_HTTP_SERVER_H_
#define LOCKSTEP_RUNTIME_ASYNC_HTTP_ASYNC_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/async_http/http_exchange.h"

namespace lockstep::async_http {

struct AsyncHttpLimits {
  int io_threads = 2;
  int64_t max_connections = 4096;
  // The listener's accept queue (listen()'s backlog); the kernel caps it at
  // net.core.somaxconn, so the default asks for as much as the system allows.
  int listen_backlog = 65535;
  int64_t max_body_bytes = 16 << 20;
  int64_t max_header_bytes = 64 << 10;
  int64_t max_header_count = 100;
  absl::Duration first_request_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  int retry_after_seconds = 1;  // on the 503 of a connection over the limit
};

// The JSON body of a refusal; the default is {"error":{"message":...,"code":status}}.
using ErrorBodyFn = std::function<std::string(int status, std::string_view message)>;

struct ServerState;
}  // namespace lockstep::async_http

struct ssl_ctx_st;

namespace lockstep::async_http {

class AsyncHttpServer {
 public:
  AsyncHttpServer(AsyncHttpLimits limits, HttpHandler handler, ErrorBodyFn error_body = nullptr);
  ~AsyncHttpServer();
  AsyncHttpServer(const AsyncHttpServer&) = delete;
  AsyncHttpServer& operator=(const AsyncHttpServer&) = delete;

  // HTTPS with `context` (an OpenSSL server context with its certificate and key; the
  // server takes a reference of its own). Before Start.
  void UseTls(ssl_ctx_st* context);

  // Binds `host`:`port` (an IP address or "localhost"; port 0: a free one) and starts
  // serving; returns the port. Once.
  absl::StatusOr<int> Start(const std::string& host, int port);
  void Stop();

  int64_t open_connections() const;
  int64_t refused_connections() const;

 private:
  std::shared_ptr<ServerState> state_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace lockstep::async_http

#endif  // LOCKSTEP_RUNTIME_ASYNC_HTTP_ASYNC_HTTP_SERVER_H_
