// How a request's output reaches its HTTP exchange (runtime/async_http): a whole JSON
// response, or server-sent events written as tokens arrive.
//
// Backpressure: an event's write queues it on the connection and then waits, on the
// request's own thread (never an I/O thread), while more than kMaxPendingSseBytes are
// queued and unsent; so a slow client holds its request back (the worker's stream is
// not read, and gRPC's flow control stops the worker), and a client that takes nothing
// for the server's write timeout is cut: the exchange is aborted, the sink reports the
// client gone and the runner cancels the request at its worker.
//
// Without a thread (RequestRunner::Start, TokenSink::OnTokensAsync) the same bound holds
// with no thread waiting: an event is queued, and the runner is told to read on only
// once at most kMaxPendingSseBytes are unsent (or the client is gone).
//
// Thread safety: OnTokens runs on the request's thread, OnTokensAsync on a gRPC callback
// thread; ClientConnected on the router's sweeper thread; SseChannel serializes the
// writes of a request's choices.
#ifndef LOCKSTEP_RUNTIME_ROUTER_HTTP_EXCHANGE_SINKS_H_
#define LOCKSTEP_RUNTIME_ROUTER_HTTP_EXCHANGE_SINKS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "runtime/async_http/http_exchange.h"
#include "runtime/router/core/router_request.h"
#include "runtime/router/http/openai_api.h"

namespace lockstep::router {

// Queued, unsent bytes of one stream above which its producer waits.
inline constexpr int64_t kMaxPendingSseBytes = 64 << 10;

// The OpenAI error response for `status` (429 with Retry-After).
void SendError(async_http::HttpExchange& exchange, const absl::Status& status);
// A JSON body, or the error.
void RespondJson(async_http::HttpExchange& exchange, const absl::StatusOr<std::string>& body);

// Collects a non-streaming response: the client is connected until its exchange is
// aborted (it closed its connection, or the server stopped).
class CollectSink : public TokenSink {
 public:
  CollectSink(OpenAiResponseWriter& writer, const async_http::HttpExchange& exchange)
      : writer_(writer), exchange_(exchange) {}
  SinkAction OnTokens(const TokenDelta& delta) override;
  bool ClientConnected() override { return !exchange_.aborted(); }

 private:
  OpenAiResponseWriter& writer_;
  const async_http::HttpExchange& exchange_;
};

// One response of server-sent events, shared by the choices of a request.
class SseChannel {
 public:
  // `exchange`'s stream has started. `write_timeout`: the server's, for the waits.
  SseChannel(async_http::HttpExchange& exchange, Clock& clock, absl::Duration keepalive,
             absl::Duration write_timeout);

  // Queues `data` (nothing when empty), then waits while the client is behind; false
  // once the client is gone.
  bool Write(const std::string& data) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `data` and calls `done` once, with false once the client is gone, when at
  // most kMaxPendingSseBytes are unsent (at once, or on an I/O thread). Never waits.
  void WriteAsync(const std::string& data, std::function<void(bool)> done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `data` without waiting (the end of a stream); false once the client is gone.
  bool Queue(const std::string& data) ABSL_LOCKS_EXCLUDED(mu_);
  // A keep-alive comment when nothing was written for the keep-alive interval; never
  // waits. False once the client is gone.
  bool KeepAlive() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  async_http::HttpExchange& exchange_;
  Clock& clock_;
  const absl::Duration keepalive_;
  const absl::Duration write_timeout_;
  absl::Mutex mu_;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
};

// Streams one choice to an SseChannel.
class SseSink : public TokenSink {
 public:
  SseSink(SseChannel& channel, OpenAiResponseWriter& writer) : channel_(channel), writer_(writer) {}
  SinkAction OnTokens(const TokenDelta& delta) override;
  void OnTokensAsync(const TokenDelta& delta, std::function<void(SinkAction)> done) override;
  bool ClientConnected() override { return channel_.KeepAlive(); }

 private:
  SseChannel& channel_;
  OpenAiResponseWriter& writer_;
};

}  // namespace lockstep::router

#endif  // LOCKSTEP_RUNTIME_ROUTER_HTTP_EXCHANGE_SINKS_H_
