#include "runtime/router/http/exchange_sinks.h"

#include <string>
#include <utility>

#include "runtime/router/routing/admission.h"

namespace lockstep::router {
namespace {

// What a sink does after its writer took new tokens.
SinkAction AfterTokens(const OpenAiResponseWriter& writer, bool client_ok) {
  if (!client_ok) return SinkAction::kClientGone;
  return writer.stopped() ? SinkAction::kStop : SinkAction::kContinue;
}

}  // namespace

void SendError(async_http::HttpExchange& exchange, const absl::Status& status) {
  const int code = HttpStatusOf(status);
  async_http::HttpHeaders headers;
  // A refusal for overload (429): when to try again.
  if (code == 429) headers.emplace_back("Retry-After", std::to_string(kAdmissionRetryAfterSeconds));
  exchange.Respond(code, "application/json", ErrorBody(status), headers);
}

void RespondJson(async_http::HttpExchange& exchange, const absl::StatusOr<std::string>& body) {
  if (!body.ok()) {
    SendError(exchange, body.status());
    return;
  }
  exchange.Respond(200, "application/json", *body);
}

SinkAction CollectSink::OnTokens(const TokenDelta& delta) {
  writer_.Append(delta);
  return AfterTokens(writer_, !exchange_.aborted());
}

SseChannel::SseChannel(async_http::HttpExchange& exchange, Clock& clock, absl::Duration keepalive,
                       absl::Duration write_timeout)
    : exchange_(exchange), clock_(clock), keepalive_(keepalive), write_timeout_(write_timeout) {
  absl::MutexLock lock(&mu_);
  last_write_ = clock_.Now();
}

bool SseChannel::Write(const std::string& data) {
  {
    absl::MutexLock lock(&mu_);
    if (!data.empty()) {
      if (!exchange_.Write(data)) return false;
      last_write_ = clock_.Now();
    }
  }
  // Outside the mutex, so that keep-alives and the other choices are not held up. The
  // server cuts a client that takes nothing for its write timeout (the exchange is then
  // aborted); one that reads slowly keeps this thread waiting as long as it progresses.
  while (!exchange_.AwaitPendingAtMost(kMaxPendingSseBytes, write_timeout_)) {
    if (exchange_.aborted()) return false;
  }
  return !exchange_.aborted();
}

bool SseChannel::Queue(const std::string& data) {
  absl::MutexLock lock(&mu_);
  if (data.empty()) return !exchange_.aborted();
  if (!exchange_.Write(data)) return false;
  last_write_ = clock_.Now();
  return true;
}

void SseChannel::WriteAsync(const std::string& data, std::function<void(bool)> done) {
  if (!Queue(data)) return done(false);
  // The server cuts a client that takes nothing for its write timeout (the exchange is
  // then aborted, which runs the callback): the wait is bounded as Write's is.
  async_http::HttpExchange& exchange = exchange_;
  exchange_.OnPendingAtMost(kMaxPendingSseBytes, [&exchange, done = std::move(done)] {
    done(!exchange.aborted());
  });
}

bool SseChannel::KeepAlive() {
  if (!mu_.TryLock()) return !exchange_.aborted();
  const absl::Time now = clock_.Now();
  bool ok = !exchange_.aborted();
  // Only while the client keeps up: a comment never adds to a backlog.
  if (ok && now - last_write_ >= keepalive_ && exchange_.pending_bytes() == 0) {
    ok = exchange_.Write(": keep-alive\n\n");
    last_write_ = now;
  }
  mu_.Unlock();
  return ok;
}

void SseSink::OnTokensAsync(const TokenDelta& delta, std::function<void(SinkAction)> done) {
  OpenAiResponseWriter& writer = writer_;
  channel_.WriteAsync(writer.StreamEvent(delta), [&writer, done = std::move(done)](bool ok) {
    done(AfterTokens(writer, ok));
  });
}

SinkAction SseSink::OnTokens(const TokenDelta& delta) {
  const bool ok = channel_.Write(writer_.StreamEvent(delta));
  return AfterTokens(writer_, ok);
}

}  // namespace lockstep::router
