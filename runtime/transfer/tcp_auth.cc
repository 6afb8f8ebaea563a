#include "runtime/transfer/tcp_auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "runtime/security/secret.h"

namespace lockstep::transfer {

// The first rejection from each peer host (bounded, so a scan cannot grow it).
void NoteRejectedConnection(const TcpSocket& socket, const absl::Status& status) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* logged = new absl::flat_hash_set<std::string>();
  const std::string peer = PeerAddress(socket);
  const std::string host = peer.substr(0, peer.rfind(':'));
  {
    absl::MutexLock lock(&mu);
    if (logged->size() >= 1024 || !logged->insert(host).second) return;
  }
  LOCKSTEP_LOG_WARN("transfer", "data plane rejected a connection from {}: {}", peer,
                    std::string(status.message()));
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
