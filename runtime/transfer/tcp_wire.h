// The KV data plane's wire: TCP between a generation rank (the puller) and a context
// rank, found through KvTransferService.DataPlane; TLS when the cluster has TLS files
// (StartTlsServer / StartTlsClient right after connecting; from then on every byte of
// the socket goes through the session). It carries the same pulls as
// KvTransferService.Pull without HTTP/2 framing, so the receiver can read each chunk's
// payload straight into its blocks (readv) and check it there.
//
// On a connection, pulls run one after another:
//   puller  -> RequestPrefix, then `request_bytes` of a serialized PullRequest;
//   context -> zero or more kChunk frames, then a kTrailer frame when every block was
//              sent, then always one kStatus frame that ends the pull (OK or the error).
// A connection whose pull did not end with a kStatus frame (cancel, deadline, broken
// stream) is closed, not reused. Integers are little-endian (both sides check the host).
//
// The socket helpers never block for long: they poll in short slices, so a caller's
// `stop` predicate (cancel, abort, shutdown) and deadline are noticed within a slice.
//
// Thread safety: value types and functions; a socket is used by one thread at a time.
#ifndef LOCKSTEP_RUNTIME_TRANSFER_TCP_WIRE_H_
#define LOCKSTEP_RUNTIME_TRANSFER_TCP_WIRE_H_

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/security/tls_session.h"

namespace lockstep::transfer {

inline constexpr uint32_t kTcpWireMagic = 0x3156'4b4c;  // "LKV1"
inline constexpr uint32_t kMaxTcpRequestBytes = 64 << 10;
inline constexpr uint32_t kMaxTcpStatusBytes = 16 << 10;

struct RequestPrefix {
  uint32_t magic = kTcpWireMagic;
  uint32_t request_bytes = 0;
  int64_t timeout_ms = 0;  // the puller's time left, as a gRPC deadline would carry
};
static_assert(sizeof(RequestPrefix) == 16);

enum class FrameKind : uint32_t { kChunk = 1, kTrailer = 2, kStatus = 3 };

// kChunk:   `num_crcs` uint32 CRC32C values, then `size` payload bytes that start at
//           byte `block_offset` of block `first_block` of `pool` (lockstep.v1.KvPool).
// kTrailer: `size` bytes of a serialized PullTrailer.
// kStatus:  `pool` holds the absl status code; `size` bytes of message follow.
struct FrameHeader {
  FrameKind kind = FrameKind::kChunk;
  int32_t pool = 0;
  int32_t first_block = 0;
  uint32_t num_crcs = 0;
  int64_t block_offset = 0;
  uint64_t size = 0;
};
static_assert(sizeof(FrameHeader) == 32);

// Predicate checked between poll slices; true stops the transfer.
using StopFn = std::function<bool()>;

// How long a blocked call waits before it checks `stop` and its deadline again.
inline constexpr absl::Duration kPollSlice = absl::Milliseconds(20);

// A connected or listening socket, with its TLS session when it has one; closes on
// destruction.
class TcpSocket {
 public:
  TcpSocket() = default;
  explicit TcpSocket(int fd) : fd_(fd) {}
  ~TcpSocket() { Close(); }
  TcpSocket(TcpSocket&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), tls_(std::move(other.tls_)) {}
  TcpSocket& operator=(TcpSocket&& other) noexcept;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // The TLS session the bytes go through; null: plain TCP.
  security::TlsSession* tls() const { return tls_.get(); }
  // From now on the bytes go through `tls` (a session over fd(), handshake done).
  void set_tls(std::unique_ptr<security::TlsSession> tls) { tls_ = std::move(tls); }
  void Close();
  // Wakes any thread blocked on the socket (its next poll sees an error or end).
  void ShutdownBoth() const;

 private:
  int fd_ = -1;
  std::unique_ptr<security::TlsSession> tls_;
};

// Listens on `host` ("127.0.0.1", "0.0.0.0", a name) at a free port; the port bound.
absl::StatusOr<std::pair<TcpSocket, int>> ListenTcp(const std::string& host);

// Waits until a connection arrives (returned), `stop` holds (checked every `slice`),
// or an error.
absl::StatusOr<TcpSocket> AcceptTcp(const TcpSocket& listener, const StopFn& stop,
                                    absl::Duration slice = kPollSlice);

// Connects to "host:port" by `deadline`.
absl::StatusOr<TcpSocket> ConnectTcp(const std::string& address, absl::Time deadline);

// TLS on a connected `socket`, by `deadline`: as the server with `context` (a server's),
// or as the client, which checks that the server's certificate is signed by the CA of
// `context` (a client's) and names `host`. Errors: Unavailable with the reason (a
// certificate that does not check, a peer that does not speak TLS), DeadlineExceeded,
// Cancelled when `stop` held.
absl::Status StartTlsServer(TcpSocket& socket, const security::TlsContext& context,
                            absl::Time deadline, const StopFn& stop);
absl::Status StartTlsClient(TcpSocket& socket, const security::TlsContext& context,
                            const std::string& host, absl::Time deadline);

// Writes every byte of `iov` (which it consumes). Errors: Unavailable when the peer
// closed or the connection broke, DeadlineExceeded, Cancelled when `stop` held.
absl::Status SendAll(const TcpSocket& socket, std::vector<iovec> iov, absl::Time deadline,
                     const StopFn& stop);
absl::Status SendAll(const TcpSocket& socket, const void* data, size_t size, absl::Time deadline,
                     const StopFn& stop);

// Reads exactly the bytes of `iov`. Errors as SendAll; the peer's orderly close is
// Unavailable("... closed the connection").
absl::Status RecvAll(const TcpSocket& socket, std::vector<iovec> iov, absl::Time deadline,
                     const StopFn& stop);
absl::Status RecvAll(const TcpSocket& socket, void* data, size_t size, absl::Time deadline,
                     const StopFn& stop, absl::Duration slice = kPollSlice);

// The status frame that ends a pull, and its reading back.
absl::Status SendStatusFrame(const TcpSocket& socket, const absl::Status& status,
                             absl::Time deadline, const StopFn& stop);
absl::Status StatusFromFrame(const FrameHeader& header, absl::string_view message);

}  // namespace lockstep::transfer

#endif  // LOCKSTEP_RUNTIME_TRANSFER_TCP_WIRE_H_
