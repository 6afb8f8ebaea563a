// The TCP data plane's token handshake (docs/security.md): a puller that holds the
// cluster token sends it first on every new connection, as a RequestPrefix whose magic
// is kTcpAuthMagic and whose `request_bytes` is the token's length, followed by the
// token. A server that has a token serves no pull on a connection until the right one
// arrived: anything else is answered with an UNAUTHENTICATED status frame, and the
// connection is closed. The first rejection from each peer address is logged.
//
// With the cluster's TLS files the handshake runs inside TLS (tcp_wire.h's
// StartTlsServer / StartTlsClient first); without them the KV bytes travel in clear,
// protected from corruption (not from reading) by the per-block CRC32C.
// docs/security.md says where that is acceptable.
//
// Thread safety: functions; thread-safe.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TCP_AUTH_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TCP_AUTH_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {

inline constexpr uint32_t kTcpAuthMagic = 0x3141'4b4c;  // "LKA1"
inline constexpr uint32_t kMaxTcpTokenBytes = 4096;

// Puller: sends `token` on a fresh connection (nothing when it is empty).
absl::Status SendTcpToken(const TcpSocket& socket, std::string_view token, absl::Time deadline);

// Server: `prefix` is the first frame read from a connection not yet authenticated
// (or a kTcpAuthMagic frame on any connection). Reads the token that follows and checks
// it against `expected` in constant time; an empty `expected` accepts any token.
// Unauthenticated when the frame is not a token, or not the right one.
absl::Status CheckTcpToken(const TcpSocket& socket, const RequestPrefix& prefix,
                           std::string_view expected, absl::Time deadline, const StopFn& stop);

// Logs a refused connection (`why`) once per peer host; bounded.
void NoteRejectedConnection(const TcpSocket& socket, const absl::Status& why);

// "ip:port" of the connected peer, or "?" when unknown.
std::string PeerAddress(const TcpSocket& socket);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TCP_AUTH_H_
