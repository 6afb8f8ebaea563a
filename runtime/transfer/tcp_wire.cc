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

// Moves all of `iov` through sendmsg or readv, resuming after partial transfers.
absl::Status Transfer(const TcpSocket& socket, std::vector<iovec> iov, absl::Time deadline,
                      const StopFn& stop, bool reading, absl::Duration slice = kPollSlice) {
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
  }
  return *this;
}

void TcpSocket::Close() {
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
