#include "runtime/async_http/connection.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <strings.h>

#include "absl/strings/str_cat.h"
#include "boost/asio/post.hpp"
#include "boost/asio/ssl/error.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/read.hpp"
#include "fmt/format.h"

namespace lockstep::async_http {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kReadChunk = 4096;
constexpr size_t kWriteSlice = 256 << 10;
constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr unsigned char kTlsHandshakeRecord = 0x16;
// After a refusal: what the client still sends is read and dropped for at most this
// long and this much, so that closing does not reset the connection (and lose the
// refusal) before the client has read it.
constexpr absl::Duration kDrainTime = absl::Milliseconds(500);
constexpr int64_t kMaxDrainBytes = 256 << 10;

bool IsToken(boost::beast::string_view value, std::string_view token) {
  return value.size() == token.size() && strncasecmp(value.data(), token.data(), token.size()) == 0;
}

std::chrono::nanoseconds Chrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

}  // namespace

Connection::Connection(tcp::socket socket, std::shared_ptr<ServerState> state)
    : socket_(std::move(socket)),
      state_(std::move(state)),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()) {
  boost::system::error_code ec;
  const tcp::endpoint remote = socket_.remote_endpoint(ec);
  if (!ec) peer_ = absl::StrCat(remote.address().to_string(), ":", remote.port());
}

Connection::~Connection() { state_->open.fetch_sub(1); }

void Connection::Start() {
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->stopping) {
      closed_ = true;
      return;
    }
    state_->connections.emplace(this, weak_from_this());
  }
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->state_->tls.has_value()) {
      self->ReadFirstBytes();
    } else {
      self->WaitForRequest();
    }
  });
}

void Connection::ReadFirstBytes() {
  // The handshake, like a request, must be complete within the read timeout.
  ArmReadTimer(state_->limits.read_timeout);
  reading_ = true;
  socket_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                            self->OnFirstBytes(ec, n);
                          });
}

void Connection::OnFirstBytes(boost::system::error_code ec, size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (ec || bytes == 0) {  // silent past the read timeout, or gone
    CloseNow();
    return;
  }
  buffer_.commit(bytes);
  const auto first = *static_cast<const unsigned char*>(buffer_.data().data());
  if (first == kTlsHandshakeRecord) {
    tls_.emplace(socket_, *state_->tls);
    tls_->async_handshake(asio::ssl::stream_base::server, buffer_.data(),
                          [self = shared_from_this()](boost::system::error_code ec, size_t used) {
                            self->OnHandshake(ec, used);
                          });
    return;
  }
  if (first >= 'A' && first <= 'Z') {  // a request method: plain HTTP
    Refuse(400, "this port speaks HTTPS: send the request over TLS (https://)");
    return;
  }
  CloseNow();
}

void Connection::OnHandshake(boost::system::error_code ec, size_t used) {
  if (closed_) return;
  DisarmReadTimer();
  if (ec) {
    CloseNow();
    return;
  }
  buffer_.consume(used);
  WaitForRequest();
}

void Connection::Close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->exchange_ != nullptr && self->response_done_ && !self->out_.empty()) {
      self->close_after_response_ = true;  // FinishResponse closes
      return;
    }
    self->CloseNow();
  });
}

void Connection::ArmReadTimer(absl::Duration after) {
  read_timed_out_ = false;
  const uint64_t generation = ++read_timer_generation_;
  read_timer_.expires_after(Chrono(after));
  read_timer_.async_wait([self = shared_from_this(), generation](boost::system::error_code ec) {
    if (ec || generation != self->read_timer_generation_ || self->closed_) return;
    self->read_timed_out_ = true;
    boost::system::error_code ignored;
    self->socket_.cancel(ignored);  // the pending read fails; its handler sees why
  });
}

void Connection::DisarmReadTimer() {
  ++read_timer_generation_;
  read_timer_.cancel();
}

void Connection::WaitForRequest() {
  if (closed_) return;
  if (reading_) {
    // The watch read of the last response is outstanding: end it (nothing else is in
    // flight now) and come back here from its handler, so that one read runs at a time.
    restart_read_ = true;
    boost::system::error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  if (buffer_.size() > 0) {  // a pipelined request's first bytes are here already
    ReadHead();
    return;
  }
  ArmReadTimer(awaiting_first_request_ ? state_->limits.first_request_timeout
                                       : state_->limits.idle_timeout);
  ReadSome();
}

void Connection::ReadSome() {
  reading_ = true;
  WithStream([&](auto& stream) {
    stream.async_read_some(buffer_.prepare(kReadChunk),
                           [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                             self->OnReadSome(ec, n);
                           });
  });
}

void Connection::OnReadSome(boost::system::error_code ec, size_t bytes) {
  reading_ = false;
  const bool restart = std::exchange(restart_read_, false);
  if (closed_) return;
  if (ec == boost::asio::error::operation_aborted && restart && !read_timed_out_) {
    WaitForRequest();
    return;
  }
  if (ec) {  // idle timeout, the client closed its side, or a failure
    CloseNow();
    return;
  }
  buffer_.commit(bytes);
  if (restart) {
    WaitForRequest();
    return;
  }
  if (exchange_ != nullptr) {
    // A response is pending: keep watching for the client leaving, but hold at most a
    // head's worth of what it sends ahead (pipelined requests wait their turn).
    if (buffer_.size() < static_cast<size_t>(state_->limits.max_header_bytes)) ReadSome();
    return;
  }
  ReadHead();
}

void Connection::ReadHead() {
  awaiting_first_request_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(state_->limits.max_header_bytes));
  parser_->body_limit(static_cast<uint64_t>(state_->limits.max_body_bytes));
  // One deadline for the head and the body, from the first byte (in the buffer now).
  ArmReadTimer(state_->limits.read_timeout);
  WithStream([&](auto& stream) {
    http::async_read_header(
        stream, buffer_, *parser_,
        [self = shared_from_this()](boost::system::error_code ec, size_t) { self->OnHead(ec); });
  });
}

void Connection::OnHead(boost::system::error_code ec) {
  if (closed_) return;
  const AsyncHttpLimits& limits = state_->limits;
  if (ec) {
    if (read_timed_out_) {
      Refuse(408, absl::StrCat("the request head and body did not arrive within ",
                               absl::FormatDuration(limits.read_timeout), " of its first byte"));
    } else if (ec == http::error::body_limit) {  // the Content-Length says so
      Refuse(413, absl::StrCat("the request body is over the limit of ", limits.max_body_bytes,
                               " bytes"));
    } else if (ec == http::error::header_limit) {
      Refuse(431, absl::StrCat("the request head is over ", limits.max_header_bytes, " bytes"));
    } else if (ec == http::error::end_of_stream || ec == asio::error::eof ||
               ec == asio::error::connection_reset || ec == asio::ssl::error::stream_truncated) {
      CloseNow();
    } else {
      Refuse(400, absl::StrCat("malformed request: ", ec.message()));
    }
    return;
  }
  const auto& head = parser_->get();
  if (std::distance(head.begin(), head.end()) > limits.max_header_count) {
    Refuse(431, absl::StrCat("the request head has more than ", limits.max_header_count,
                             " header fields"));
    return;
  }
  if (head.find(http::field::transfer_encoding) != head.end()) {
    Refuse(411, "send the request body with Content-Length (Transfer-Encoding is not accepted)");
    return;
  }
  if (auto it = head.find(http::field::content_encoding);
      it != head.end() && !IsToken(it->value(), "identity")) {
    Refuse(415, absl::StrCat("Content-Encoding '", std::string(it->value()),
                             "' is not accepted (send the body uncompressed)"));
    return;
  }
  if (boost::optional<uint64_t> length = parser_->content_length();
      length.has_value() && *length > static_cast<uint64_t>(limits.max_body_bytes)) {
    Refuse(413, absl::StrCat("the request body of ", *length, " bytes is over the limit of ",
                             limits.max_body_bytes));
    return;
  }
  keep_alive_ = head.keep_alive();
  if (parser_->is_done()) {
    Dispatch();
    return;
  }
  if (auto it = head.find(http::field::expect);
      it != head.end() && IsToken(it->value(), "100-continue")) {
    WithStream([&](auto& stream) {
      asio::async_write(stream, asio::buffer(kContinue, sizeof(kContinue) - 1),
                        [self = shared_from_this()](boost::system::error_code ec, size_t) {
                          if (ec) {
                            self->CloseNow();
                          } else {
                            self->ReadBody();
                          }
                        });
    });
    return;
  }
  ReadBody();
}

void Connection::ReadBody() {
  if (closed_) return;
  WithStream([&](auto& stream) {
    http::async_read(
        stream, buffer_, *parser_,
        [self = shared_from_this()](boost::system::error_code ec, size_t) { self->OnBody(ec); });
  });
}

void Connection::OnBody(boost::system::error_code ec) {
  if (closed_) return;
  if (ec) {
    if (read_timed_out_) {
      Refuse(408,
             absl::StrCat("the request head and body did not arrive within ",
                          absl::FormatDuration(state_->limits.read_timeout), " of its first byte"));
    } else if (ec == http::error::body_limit) {
      Refuse(413, absl::StrCat("the request body is over the limit of ",
                               state_->limits.max_body_bytes, " bytes"));
    } else {
      CloseNow();
    }
    return;
  }
  Dispatch();
}

void Connection::Dispatch() {
  DisarmReadTimer();
  auto& message = parser_->get();
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  for (const auto& field : message) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = std::move(message.body());
  request.peer = peer_;
  parser_.reset();
  exchange_ = std::make_shared<HttpExchange>(shared_from_this(), std::move(request), keep_alive_);
  response_done_ = false;
  if (!reading_) ReadSome();  // notices the client leaving while the response is pending
  std::shared_ptr<HttpExchange> exchange = exchange_;
  state_->handler(std::move(exchange));
}

void Connection::Queue(const HttpExchange* exchange, std::string bytes, bool last) {
  asio::post(socket_.get_executor(),
             [self = shared_from_this(), exchange, bytes = std::move(bytes), last]() mutable {
               if (self->closed_ || exchange != self->exchange_.get()) return;
               self->out_.push_back(std::move(bytes));
               if (last) self->response_done_ = true;
               self->WriteNext();
             });
}

void Connection::Refuse(int status, std::string_view message) {
  DisarmReadTimer();
  parser_.reset();
  keep_alive_ = false;
  close_after_write_ = true;
  out_.push_back(state_->RefusalResponse(status, message));
  WriteNext();
}

void Connection::WriteNext() {
  if (closed_ || writing_) return;
  if (out_.empty()) {
    if (response_done_ && exchange_ != nullptr) FinishResponse();
    return;
  }
  writing_ = true;
  const uint64_t generation = ++write_timer_generation_;
  write_timer_.expires_after(Chrono(state_->limits.write_timeout));
  write_timer_.async_wait([self = shared_from_this(), generation](boost::system::error_code ec) {
    // The client took nothing for the write timeout: cut it (the exchange is aborted).
    if (!ec && generation == self->write_timer_generation_) self->CloseNow();
  });
  // At most kWriteSlice per write, so the timeout is on progress, not on a whole body.
  const std::string& front = out_.front();
  const size_t slice = std::min(kWriteSlice, front.size() - front_offset_);
  WithStream([&](auto& stream) {
    asio::async_write(stream, asio::buffer(front.data() + front_offset_, slice),
                      [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                        self->OnWritten(ec, n);
                      });
  });
}

void Connection::OnWritten(boost::system::error_code ec, size_t bytes) {
  writing_ = false;
  ++write_timer_generation_;
  write_timer_.cancel();
  if (closed_) return;
  if (ec) {
    CloseNow();
    return;
  }
  if (exchange_ != nullptr) exchange_->Sent(static_cast<int64_t>(bytes));
  front_offset_ += bytes;
  if (front_offset_ < out_.front().size()) {
    WriteNext();
    return;
  }
  front_offset_ = 0;
  out_.pop_front();
  if (out_.empty() && close_after_write_) {
    DrainAndClose();
    return;
  }
  WriteNext();
}

void Connection::DrainAndClose() {
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  ArmReadTimer(kDrainTime);  // its expiry ends the read below
  DrainSome(0);
}

void Connection::DrainSome(int64_t drained) {
  buffer_.consume(buffer_.size());
  socket_.async_read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this(), drained](boost::system::error_code ec, size_t n) {
        if (self->closed_) return;
        if (ec || drained + static_cast<int64_t>(n) >= kMaxDrainBytes) {
          self->CloseNow();
          return;
        }
        self->DrainSome(drained + static_cast<int64_t>(n));
      });
}

void Connection::FinishResponse() {
  exchange_.reset();  // complete: never aborted
  response_done_ = false;
  if (!keep_alive_ || close_after_response_) {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    CloseNow();
    return;
  }
  WaitForRequest();
}

void Connection::CloseNow() {
  if (closed_) return;
  closed_ = true;
  DisarmReadTimer();
  ++write_timer_generation_;
  write_timer_.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
  out_.clear();
  front_offset_ = 0;
  if (exchange_ != nullptr) {
    std::shared_ptr<HttpExchange> aborted = std::move(exchange_);
    aborted->Abort();
  }
  absl::MutexLock lock(&state_->mu);
  state_->connections.erase(this);
}

std::string ServerState::RefusalResponse(int status, std::string_view message,
                                         std::string_view extra) {
  const std::string body = error_body(status, message);
  return fmt::format(
      "{}Content-Type: application/json\r\n{}Connection: close\r\nContent-Length: {}\r\n\r\n{}",
      StatusLine(status), extra, body.size(), body);
}

}  // namespace lockstep::async_http
