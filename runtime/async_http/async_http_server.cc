#include "runtime/async_http/async_http_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/ip/address.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "fmt/format.h"
#include "openssl/ssl.h"
#include "runtime/async_http/connection.h"

namespace lockstep::async_http {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string DefaultErrorBody(int status, std::string_view message) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return fmt::format("{{\"error\":{{\"message\":\"{}\",\"code\":{}}}}}", escaped, status);
}

// A connection over the limit: 503 without reading anything, then closed (at the
// latest after the write timeout).
void RefuseConnection(const std::shared_ptr<ServerState>& state, tcp::socket socket) {
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
  auto text = std::make_shared<std::string>(state->RefusalResponse(
      503,
      absl::StrCat("the server is at its limit of ", state->limits.max_connections,
                   " open connections; retry later"),
      absl::StrCat("Retry-After: ", state->limits.retry_after_seconds, "\r\n")));
  auto timer = std::make_shared<asio::steady_timer>(sock->get_executor());
  timer->expires_after(absl::ToChronoNanoseconds(state->limits.write_timeout));
  timer->async_wait([sock](boost::system::error_code ec) {
    boost::system::error_code ignored;
    if (!ec) sock->close(ignored);
  });
  asio::async_write(*sock, asio::buffer(*text),
                    [sock, text, timer](boost::system::error_code, size_t) {
                      boost::system::error_code ignored;
                      timer->cancel();
                      sock->shutdown(tcp::socket::shutdown_send, ignored);
                      sock->close(ignored);
                    });
}

void Accept(std::shared_ptr<ServerState> state) {
  state->acceptor->async_accept(asio::make_strand(state->io), [state](boost::system::error_code ec,
                                                                      tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !state->acceptor->is_open()) return;
    if (ec) {
      // E.g. out of descriptors: try again shortly rather than spin.
      auto retry = std::make_shared<asio::steady_timer>(state->io, std::chrono::milliseconds(20));
      retry->async_wait([state, retry](boost::system::error_code) { Accept(state); });
      return;
    }
    if (state->open.load() >= state->limits.max_connections) {
      state->refused.fetch_add(1);
      if (state->tls.has_value()) {
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        RefuseConnection(state, std::move(socket));
      }
    } else {
      state->open.fetch_add(1);
      // Each SSE event is a small write: without TCP_NODELAY, Nagle and delayed ACKs
      // add ~40 ms to it.
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Connection>(std::move(socket), state)->Start();
    }
    Accept(state);
  });
}

}  // namespace

AsyncHttpServer::AsyncHttpServer(AsyncHttpLimits limits, HttpHandler handler,
                                 ErrorBodyFn error_body)
    : state_(std::make_shared<ServerState>()) {
  state_->limits = limits;
  state_->handler = std::move(handler);
  state_->error_body = error_body != nullptr ? std::move(error_body) : DefaultErrorBody;
}

AsyncHttpServer::~AsyncHttpServer() { Stop(); }

void AsyncHttpServer::UseTls(ssl_ctx_st* context) {
  SSL_CTX_up_ref(context);  // asio's context frees its handle
  state_->tls.emplace(context);
}

absl::StatusOr<int> AsyncHttpServer::Start(const std::string& host, int port) {
  boost::system::error_code ec;
  const asio::ip::address address =
      asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("cannot listen on '{}': not an IP address", host));
  }
  state_->acceptor.emplace(asio::make_strand(state_->io));
  tcp::acceptor& acceptor = *state_->acceptor;
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(std::max(1, state_->limits.listen_backlog), ec);
  if (ec) {
    return absl::UnavailableError(
        fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  }
  const int bound = acceptor.local_endpoint().port();
  Accept(state_);
  state_->work.emplace(state_->io.get_executor());  // the loop runs until Stop
  for (int i = 0; i < std::max(1, state_->limits.io_threads); ++i) {
    threads_.emplace_back([state = state_] { state->io.run(); });
  }
  return bound;
}

void AsyncHttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  std::vector<std::weak_ptr<Connection>> open;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    for (auto& [raw, weak] : state_->connections) open.push_back(weak);
  }
  if (state_->acceptor.has_value()) {
    asio::post(state_->acceptor->get_executor(), [state = state_] {
      boost::system::error_code ignored;
      state->acceptor->close(ignored);
    });
  }
  for (std::weak_ptr<Connection>& weak : open) {
    if (std::shared_ptr<Connection> c = weak.lock()) c->Close();
  }
  // The loop ends once the closes have run and nothing is pending (a refused
  // connection's 503 takes at most the write timeout); exchanges that handlers still
  // hold then write nowhere.
  state_->work.reset();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int64_t AsyncHttpServer::open_connections() const { return state_->open.load(); }
int64_t AsyncHttpServer::refused_connections() const { return state_->refused.load(); }

}  // namespace lockstep::async_http
