#include "runtime/transfer/tcp_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/host_port.h"

namespace lockstep::transfer {
namespace {

static_assert(std::endian::native == std::endian::little, "the TCP wire is little-endian");

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

void Configure(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Waits for `events` on `fd` for at most one slice; OK when the caller should retry the
// operation (ready, or the slice passed), otherwise why it must stop.
absl::Status WaitSlice(int fd, short events, absl::Time deadline, const StopFn& stop,
                       absl::Duration slice) {
  if (stop && stop()) return absl::CancelledError("stopped");
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("deadline exceeded");
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(std::min(left, slice))) + 1;
  pollfd p{fd, events, 0};
  if (poll(&p, 1, ms) < 0 && errno != EINTR) return Errno("poll");
  return absl::OkStatus();
}

// Small pieces are gathered up to this size (the largest TLS record) before a TLS
// write, so that a frame header does not become a record of its own.
constexpr size_t kTlsGather = 16 << 10;

absl::Status TlsError(absl::string_view what, const security::TlsSession& tls) {
  return absl::UnavailableError(absl::StrCat(what, " the data connection (TLS): ", tls.error()));
}

// Moves `size` bytes at `data` through the socket's TLS session.
absl::Status TlsTransfer(const TcpSocket& socket, char* data, size_t size, absl::Time deadline,
                         const StopFn& stop, bool reading, absl::Duration slice) {
  security::TlsSession& tls = *socket.tls();
  while (size > 0) {
    short wait = 0;
    const ssize_t n = reading ? tls.Read(data, size, &wait) : tls.Write(data, size, &wait);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("the peer closed the connection");
    if (wait == 0) return TlsError(reading ? "read from" : "write to", tls);
    if (absl::Status s = WaitSlice(socket.fd(), wait, deadline, stop, slice); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Transfer over TLS: reads go straight into each piece; writes gather small pieces.
absl::Status TlsTransferAll(const TcpSocket& socket, const std::vector<iovec>& iov,
                            absl::Time deadline, const StopFn& stop, bool reading,
                            absl::Duration slice) {
  std::string gathered;
  const auto flush = [&] {
    absl::Status s =
        TlsTransfer(socket, gathered.data(), gathered.size(), deadline, stop, false, slice);
    gathered.clear();
    return s;
  };
  for (const iovec& piece : iov) {
    char* data = static_cast<char*>(piece.iov_base);
    if (reading || piece.iov_len >= kTlsGather) {
      if (!gathered.empty()) {
        if (absl::Status s = flush(); !s.ok()) return s;
      }
      absl::Status s = TlsTransfer(socket, data, piece.iov_len, deadline, stop, reading, slice);
      if (!s.ok()) return s;
      continue;
    }
    if (gathered.size() + piece.iov_len > kTlsGather) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
    gathered.append(data, piece.iov_len);
  }
  return gathered.empty() ? absl::OkStatus() : flush();
}

// Moves all of `iov` through sendmsg or readv (or the TLS session), resuming after
// partial transfers.
absl::Status Transfer(const TcpSocket& socket, std::vector<iovec> iov, absl::Time deadline,
                      const StopFn& stop, bool reading, absl::Duration slice = kPollSlice) {
  if (socket.tls() != nullptr) return TlsTransferAll(socket, iov, deadline, stop, reading, slice);
  size_t first = 0;
  while (first < iov.size() && iov[first].iov_len == 0) ++first;
  while (first < iov.size()) {
    const size_t count = std::min<size_t>(iov.size() - first, IOV_MAX);
    ssize_t n;
    if (reading) {
      n = readv(socket.fd(), &iov[first], static_cast<int>(count));
    } else {
      msghdr message{};
      message.msg_iov = &iov[first];
      message.msg_iovlen = count;
      n = sendmsg(socket.fd(), &message, MSG_NOSIGNAL);
    }
    if (n == 0 && reading) return absl::UnavailableError("the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return Errno(reading ? "read from the data connection" : "write to the data connection");
      }
      const absl::Status wait =
          WaitSlice(socket.fd(), reading ? POLLIN : POLLOUT, deadline, stop, slice);
      if (!wait.ok()) return wait;
      continue;
    }
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
  }
  return absl::OkStatus();
}

}  // namespace

TcpSocket& TcpSocket::operator=(TcpSocket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = std::exchange(other.fd_, -1);
    tls_ = std::move(other.tls_);
  }
  return *this;
}

void TcpSocket::Close() {
  tls_.reset();
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void TcpSocket::ShutdownBoth() const {
  if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
}

absl::StatusOr<std::pair<TcpSocket, int>> ListenTcp(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "0", &hints, &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve data plane host '", host, "'"));
  }
  TcpSocket socket(::socket(AF_INET, SOCK_STREAM, 0));
  const int one = 1;
  setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const int bound = bind(socket.fd(), found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (!socket.valid() || bound != 0 || listen(socket.fd(), 64) != 0 ||
      getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno(absl::StrCat("data plane cannot listen on ", host));
  }
  fcntl(socket.fd(), F_SETFL, fcntl(socket.fd(), F_GETFL) | O_NONBLOCK);
  return std::make_pair(std::move(socket), static_cast<int>(ntohs(addr.sin_port)));
}

absl::StatusOr<TcpSocket> AcceptTcp(const TcpSocket& listener, const StopFn& stop,
                                    absl::Duration slice) {
  for (;;) {
    const int fd = accept(listener.fd(), nullptr, nullptr);
    if (fd >= 0) {
      Configure(fd);
      return TcpSocket(fd);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return Errno("accept");
    }
    const absl::Status wait = WaitSlice(listener.fd(), POLLIN, absl::InfiniteFuture(), stop, slice);
    if (!wait.ok()) return wait;
  }
}

absl::StatusOr<TcpSocket> ConnectTcp(const std::string& address, absl::Time deadline) {
  const absl::StatusOr<HostPort> parsed = ParseHostPort(address);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data plane address: ", parsed.status().message()));
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string& host = parsed->host;
  if (getaddrinfo(host.c_str(), absl::StrCat(parsed->port).c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve data plane host '", host, "'"));
  }
  TcpSocket socket(::socket(AF_INET, SOCK_STREAM, 0));
  if (!socket.valid()) {
    freeaddrinfo(found);
    return Errno("socket");
  }
  Configure(socket.fd());
  const int rc = connect(socket.fd(), found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (rc != 0 && errno != EINPROGRESS) return Errno(absl::StrCat("connect to ", address));
  if (rc != 0) {
    for (;;) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(absl::StrCat("connect to ", address, " timed out"));
      }
      pollfd p{socket.fd(), POLLOUT, 0};
      const int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left) + 1));
      if (ready < 0 && errno == EINTR) continue;
      if (ready > 0) break;
    }
    int error = 0;
    socklen_t len = sizeof(error);
    getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) {
      errno = error;
      return Errno(absl::StrCat("connect to ", address));
    }
  }
  return socket;
}

namespace {

absl::Status FinishTls(TcpSocket& socket,
                       absl::StatusOr<std::unique_ptr<security::TlsSession>> session,
                       absl::Time deadline, const StopFn& stop) {
  if (!session.ok()) return session.status();
  if (absl::Status s = security::CompleteHandshake(**session, deadline, stop); !s.ok()) return s;
  socket.set_tls(*std::move(session));
  return absl::OkStatus();
}

}  // namespace

absl::Status StartTlsServer(TcpSocket& socket, const security::TlsContext& context,
                            absl::Time deadline, const StopFn& stop) {
  return FinishTls(socket, security::TlsSession::Server(context, socket.fd()), deadline, stop);
}

absl::Status StartTlsClient(TcpSocket& socket, const security::TlsContext& context,
                            const std::string& host, absl::Time deadline) {
  return FinishTls(socket, security::TlsSession::Client(context, socket.fd(), host), deadline,
                   nullptr);
}

absl::Status SendAll(const TcpSocket& socket, std::vector<iovec> iov, absl::Time deadline,
                     const StopFn& stop) {
  return Transfer(socket, std::move(iov), deadline, stop, /*reading=*/false);
}

absl::Status SendAll(const TcpSocket& socket, const void* data, size_t size, absl::Time deadline,
                     const StopFn& stop) {
  return SendAll(socket, {{const_cast<void*>(data), size}}, deadline, stop);
}

absl::Status RecvAll(const TcpSocket& socket, std::vector<iovec> iov, absl::Time deadline,
                     const StopFn& stop) {
  return Transfer(socket, std::move(iov), deadline, stop, /*reading=*/true);
}

absl::Status RecvAll(const TcpSocket& socket, void* data, size_t size, absl::Time deadline,
                     const StopFn& stop, absl::Duration slice) {
  return Transfer(socket, {{data, size}}, deadline, stop, /*reading=*/true, slice);
}

absl::Status SendStatusFrame(const TcpSocket& socket, const absl::Status& status,
                             absl::Time deadline, const StopFn& stop) {
  const std::string message(
      status.message().substr(0, std::min<size_t>(status.message().size(), kMaxTcpStatusBytes)));
  FrameHeader header;
  header.kind = FrameKind::kStatus;
  header.pool = static_cast<int32_t>(status.code());
  header.size = message.size();
  return SendAll(socket,
                 {{&header, sizeof(header)}, {const_cast<char*>(message.data()), message.size()}},
                 deadline, stop);
}

absl::Status StatusFromFrame(const FrameHeader& header, absl::string_view message) {
  if (header.pool < 0 || header.pool > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::DataLossError(
        absl::StrCat("a status frame carries the unknown code ", header.pool));
  }
  return absl::Status(static_cast<absl::StatusCode>(header.pool), message);
}

}  // namespace lockstep::transfer
