// HttpExchange: one HTTP request of an AsyncHttpServer connection and its response,
// handed to the server's handler. The handler answers at once or later, from any thread:
// a whole response (Respond), or a chunked stream (StartStream, Write..., End) such as
// server-sent events. Writes never block: they are queued on the connection, which
// sends them as the client takes them; a client that takes nothing for the server's
// write timeout is cut off. When the connection ends before the response is complete
// (the client left, was cut off, or the server stopped), the abort callback runs once,
// so the request's work can be cancelled, and every later Write returns false.
//
// Thread safety: thread-safe. Ownership: shared by the handler and the connection.
#ifndef LOCKSTEP_RUNTIME_ASYNC_HTTP_HTTP_EXCHANGE_H_
#define LOCKSTEP_RUNTIME_ASYNC_HTTP_HTTP_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace lockstep::async_http {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // the path and query as sent
  HttpHeaders headers;  // as received
  std::string body;
  std::string peer;  // the client's address, "ip:port"

  // The first header named `name` (case-insensitive), or "" when there is none.
  std::string_view Header(std::string_view name) const;
};

class Connection;

class HttpExchange {
 public:
  HttpExchange(std::shared_ptr<Connection> connection, HttpRequest request, bool keep_alive);
  HttpExchange(const HttpExchange&) = delete;
  HttpExchange& operator=(const HttpExchange&) = delete;

  const HttpRequest& request() const { return request_; }

  // The whole response (Content-Length). At most one of Respond and StartStream.
  void Respond(int status, std::string_view content_type, std::string body,
               const HttpHeaders& headers = {});
  // The head of a chunked response; then Write and End.
  void StartStream(int status, std::string_view content_type, const HttpHeaders& headers = {});
  // Queues one chunk (empty data is skipped); false once the exchange was aborted.
  bool Write(std::string_view data);
  // Ends the chunked response.
  void End();

  // Bytes queued and not yet written to the socket (a handler may stop producing while
  // it is high: the backpressure signal).
  int64_t pending_bytes() const { return pending_bytes_.load(); }
  // Waits (off the I/O threads) until at most `bytes` are pending, the exchange is
  // aborted, or `timeout` passes; true when at most `bytes` are pending. A producer
  // that waits here before each write holds at most about `bytes` queued, and its
  // source is held back by as much as the client falls behind.
  bool AwaitPendingAtMost(int64_t bytes, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // The same without a thread: runs `callback` once, when at most `bytes` are pending
  // or the exchange is aborted (at once, on this thread, if that is so now; else on an
  // I/O thread, which it must not block).
  void OnPendingAtMost(int64_t bytes, std::function<void()> callback) ABSL_LOCKS_EXCLUDED(mu_);
  bool aborted() const { return aborted_.load(); }
  // Runs `callback` once if the exchange is aborted (at once if it already was).
  void OnAbort(std::function<void()> callback) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Connection;
  // The connection's side: bytes written, and the end of the connection.
  void Sent(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Abort() ABSL_LOCKS_EXCLUDED(mu_);
  void Queue(std::string bytes, bool last);
  // Runs the drain waiters whose bound is met (`all`: every one, the exchange ended).
  void RunDrainWaiters(bool all) ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<Connection> connection_;
  const HttpRequest request_;
  const bool keep_alive_;
  std::atomic<bool> started_{false};
  std::atomic<bool> ended_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<int64_t> pending_bytes_{0};
  std::atomic<int> waiters_{0};  // in AwaitPendingAtMost
  absl::Mutex mu_;
  std::function<void()> on_abort_ ABSL_GUARDED_BY(mu_);
  struct DrainWaiter {
    int64_t bytes;
    std::function<void()> callback;
  };
  std::atomic<int> drain_waiters_count_{0};  // entries of drain_waiters_, counted first
  std::vector<DrainWaiter> drain_waiters_ ABSL_GUARDED_BY(mu_);
};

using HttpHandler = std::function<void(std::shared_ptr<HttpExchange>)>;

// "HTTP/1.1 200 OK\r\n" and the like.
std::string StatusLine(int status);

}  // namespace lockstep::async_http

#endif  // LOCKSTEP_RUNTIME_ASYNC_HTTP_HTTP_EXCHANGE_H_
