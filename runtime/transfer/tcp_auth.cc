#include "runtime/transfer/tcp_auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/security/peer_log.h"
#include "runtime/security/secret.h"

namespace lockstep::transfer {

void NoteRejectedConnection(const TcpSocket& socket, const absl::Status& status) {
  static security::PeerLog* const log = new security::PeerLog("data plane");
  log->Note(PeerAddress(socket), absl::StrCat("a connection: ", status.message()));
}

absl::Status SendTcpToken(const TcpSocket& socket, std::string_view token, absl::Time deadline) {
  if (token.empty()) return absl::OkStatus();
  RequestPrefix prefix;
  prefix.magic = kTcpAuthMagic;
  prefix.request_bytes = static_cast<uint32_t>(token.size());
  std::vector<iovec> iov = {{&prefix, sizeof(prefix)},
                            {const_cast<char*>(token.data()), token.size()}};
  return SendAll(socket, std::move(iov), deadline, nullptr);
}

absl::Status CheckTcpToken(const TcpSocket& socket, const RequestPrefix& prefix,
                           std::string_view expected, absl::Time deadline, const StopFn& stop) {
  absl::Status status;
  if (prefix.magic != kTcpAuthMagic) {
    status = absl::UnauthenticatedError("no cluster token");
  } else if (prefix.request_bytes > kMaxTcpTokenBytes) {
    status = absl::UnauthenticatedError("cluster token too long");
  } else {
    std::string token(prefix.request_bytes, '\0');
    status = RecvAll(socket, token.data(), token.size(), deadline, stop);
    if (status.ok() && !expected.empty() && !security::ConstantTimeEquals(token, expected)) {
      status = absl::UnauthenticatedError("wrong cluster token");
    }
  }
  if (absl::IsUnauthenticated(status)) NoteRejectedConnection(socket, status);
  return status;
}

std::string PeerAddress(const TcpSocket& socket) {
  sockaddr_storage address{};
  socklen_t size = sizeof(address);
  if (getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&address), &size) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = {};
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  } else {
    return "?";
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace lockstep::transfer
