#include "runtime/async_http/http_exchange.h"

#include <strings.h>

#include "boost/beast/http/status.hpp"
#include "fmt/format.h"
#include "runtime/async_http/connection.h"

namespace lockstep::async_http {
namespace {

std::string HeaderLines(const HttpHeaders& headers) {
  std::string lines;
  for (const auto& [name, value] : headers) lines += fmt::format("{}: {}\r\n", name, value);
  return lines;
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) {
      return value;
    }
  }
  return {};
}

std::string StatusLine(int status) {
  const auto reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  return fmt::format("HTTP/1.1 {} {}\r\n", status, std::string_view(reason.data(), reason.size()));
}

HttpExchange::HttpExchange(std::shared_ptr<Connection> connection, HttpRequest request,
                           bool keep_alive)
    : connection_(std::move(connection)), request_(std::move(request)), keep_alive_(keep_alive) {}

void HttpExchange::Respond(int status, std::string_view content_type, std::string body,
                           const HttpHeaders& headers) {
  if (started_.exchange(true)) return;
  ended_.store(true);
  std::string bytes = fmt::format("{}Content-Type: {}\r\nContent-Length: {}\r\n{}{}\r\n",
                                  StatusLine(status), content_type, body.size(),
                                  HeaderLines(headers), keep_alive_ ? "" : "Connection: close\r\n");
  bytes.append(body);
  Queue(std::move(bytes), /*last=*/true);
}

void HttpExchange::StartStream(int status, std::string_view content_type,
                               const HttpHeaders& headers) {
  if (started_.exchange(true)) return;
  Queue(fmt::format("{}Content-Type: {}\r\nTransfer-Encoding: chunked\r\nCache-Control: "
                    "no-cache\r\n{}{}\r\n",
                    StatusLine(status), content_type, HeaderLines(headers),
                    keep_alive_ ? "" : "Connection: close\r\n"),
        /*last=*/false);
}

bool HttpExchange::Write(std::string_view data) {
  if (aborted_.load()) return false;
  if (!started_.load() || ended_.load()) return false;
  if (data.empty()) return true;
  Queue(fmt::format("{:x}\r\n{}\r\n", data.size(), data), /*last=*/false);
  return true;
}

void HttpExchange::End() {
  if (!started_.load() || ended_.exchange(true)) return;
  Queue("0\r\n\r\n", /*last=*/true);
}

void HttpExchange::Queue(std::string bytes, bool last) {
  pending_bytes_.fetch_add(static_cast<int64_t>(bytes.size()));
  connection_->Queue(this, std::move(bytes), last);
}

void HttpExchange::Sent(int64_t bytes) {
  pending_bytes_.fetch_sub(bytes);
  // A waiter's condition is evaluated again when the mutex is released.
  if (waiters_.load() > 0) absl::MutexLock lock(&mu_);
  if (drain_waiters_count_.load() > 0) RunDrainWaiters(/*all=*/false);
}

void HttpExchange::RunDrainWaiters(bool all) {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    const int64_t pending = pending_bytes_.load();
    for (auto it = drain_waiters_.begin(); it != drain_waiters_.end();) {
      if (all || pending <= it->bytes) {
        ready.push_back(std::move(it->callback));
        it = drain_waiters_.erase(it);
        drain_waiters_count_.fetch_sub(1);
      } else {
        ++it;
      }
    }
  }
  for (auto& callback : ready) callback();
}

void HttpExchange::OnPendingAtMost(int64_t bytes, std::function<void()> callback) {
  // Counted before pending_bytes_ is read: a Sent that lowers it after the read sees
  // the count and looks at the waiters (under the mutex, so after this one is added).
  drain_waiters_count_.fetch_add(1);
  {
    absl::MutexLock lock(&mu_);
    if (pending_bytes_.load() > bytes && !aborted_.load()) {
      drain_waiters_.push_back({bytes, std::move(callback)});
      return;
    }
  }
  drain_waiters_count_.fetch_sub(1);
  callback();
}

bool HttpExchange::AwaitPendingAtMost(int64_t bytes, absl::Duration timeout) {
  if (pending_bytes_.load() <= bytes) return true;
  waiters_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  const auto drained_or_aborted = [this, bytes] {
    return pending_bytes_.load() <= bytes || aborted_.load();
  };
  mu_.AwaitWithTimeout(absl::Condition(&drained_or_aborted), timeout);
  waiters_.fetch_sub(1);
  return pending_bytes_.load() <= bytes && !aborted_.load();
}

void HttpExchange::OnAbort(std::function<void()> callback) {
  {
    absl::MutexLock lock(&mu_);
    if (!aborted_.load()) {
      on_abort_ = std::move(callback);
      return;
    }
  }
  callback();
}

void HttpExchange::Abort() {
  std::function<void()> callback;
  {
    absl::MutexLock lock(&mu_);
    aborted_.store(true);
    callback = std::move(on_abort_);
    on_abort_ = nullptr;
  }
  if (callback) callback();
  RunDrainWaiters(/*all=*/true);
}

}  // namespace lockstep::async_http
