// The server's per-connection state machine (internal to async_http): waits for a
// request (the first request timeout, later the idle timeout), reads and checks its head and body (one read deadline),
// hands it to the handler as an HttpExchange, and writes the exchange's queued bytes
// (write timeout), then waits for the next request on a keep-alive connection. With
// TLS it first reads the client's first bytes and runs the handshake with them (both
// within the read timeout); every later read and write goes through the TLS stream.
//
// Thread safety: everything runs on the connection's strand; the public methods may be
// called from any thread (they post to the strand).
#ifndef LOCKSTEP_RUNTIME_ASYNC_HTTP_CONNECTION_H_
#define LOCKSTEP_RUNTIME_ASYNC_HTTP_CONNECTION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl/context.hpp"
#include "boost/asio/ssl/stream.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/string_body.hpp"
#include "runtime/async_http/async_http_server.h"
#include "runtime/async_http/http_exchange.h"

namespace lockstep::async_http {

// What the server and its connections share.
struct ServerState {
  AsyncHttpLimits limits;
  HttpHandler handler;
  ErrorBodyFn error_body;
  std::optional<boost::asio::ssl::context> tls;  // set: HTTPS only
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor;
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> refused{0};
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  absl::flat_hash_map<const Connection*, std::weak_ptr<Connection>> connections ABSL_GUARDED_BY(mu);

  std::string RefusalResponse(int status, std::string_view message, std::string_view extra = "");
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `socket`'s executor is the connection's strand.
  Connection(boost::asio::ip::tcp::socket socket, std::shared_ptr<ServerState> state);
  ~Connection();

  void Start();
  // From an exchange (any thread): queue bytes; `last` ends its response.
  void Queue(const HttpExchange* exchange, std::string bytes, bool last);
  // Closes the connection (any thread), aborting its exchange; one whose response is
  // all queued is closed once it is written (within the write timeout).
  void Close();

 private:
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  // Runs `op` with the connection's byte stream: the TLS stream once its handshake
  // began, else the socket.
  template <typename Op>
  void WithStream(Op&& op) {
    if (tls_.has_value()) {
      op(*tls_);
    } else {
      op(socket_);
    }
  }

  // HTTPS: the first bytes decide (a TLS record, plain HTTP answered 400, else closed).
  void ReadFirstBytes();
  void OnFirstBytes(boost::system::error_code ec, size_t bytes);
  void OnHandshake(boost::system::error_code ec, size_t used);
  void WaitForRequest();
  // One read into the buffer: the wait for a request, or (while a response is pending)
  // the watch that notices a client closing its side.
  void ReadSome();
  void OnReadSome(boost::system::error_code ec, size_t bytes);
  void ReadHead();
  void OnHead(boost::system::error_code ec);
  void ReadBody();
  void OnBody(boost::system::error_code ec);
  void Dispatch();
  // Writes `response` (a refusal) and closes.
  void Refuse(int status, std::string_view message);
  void WriteNext();
  void OnWritten(boost::system::error_code ec, size_t bytes);
  void FinishResponse();
  // After a refusal: shuts the sending side, drops what the client still sends (for a
  // short while), then closes.
  void DrainAndClose();
  void DrainSome(int64_t drained);
  void CloseNow();
  // A timer whose expiry cancels the socket's operations (`timed_out` then says why
  // they failed); a new arm or a disarm voids the previous one.
  void ArmReadTimer(absl::Duration after);
  void DisarmReadTimer();

  boost::asio::ip::tcp::socket socket_;
  const std::shared_ptr<ServerState> state_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  uint64_t read_timer_generation_ = 0;
  uint64_t write_timer_generation_ = 0;
  boost::asio::steady_timer read_timer_;
  boost::asio::steady_timer write_timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  bool read_timed_out_ = false;
  bool awaiting_first_request_ = true;  // no byte of a request has arrived yet
  bool closed_ = false;
  bool reading_ = false;       // a ReadSome is outstanding
  bool restart_read_ = false;  // it was cancelled to start the wait for a request
  std::string peer_;

  std::shared_ptr<HttpExchange> exchange_;  // the request being answered
  bool keep_alive_ = true;
  bool response_done_ = false;  // the exchange queued its last bytes
  std::deque<std::string> out_;
  size_t front_offset_ = 0;  // of out_.front(), already written
  bool writing_ = false;
  bool close_after_write_ = false;
  bool close_after_response_ = false;  // Close came while the response was being written
};

}  // namespace lockstep::async_http

#endif  // LOCKSTEP_RUNTIME_ASYNC_HTTP_CONNECTION_H_
