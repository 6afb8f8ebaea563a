// TLS over a non-blocking socket with OpenSSL (Debian's libssl), for the listeners that
// are not gRPC: the router's HTTPS API and the TCP data plane (docs/security.md §2).
// The caller keeps its own socket loop (its timeouts, deadlines and stop checks): each
// operation either makes progress or says which readiness to poll the socket for.
//
//   ASSIGN_OR_RETURN(auto context, TlsContext::ForServer(cert_pem, key_pem));
//   ASSIGN_OR_RETURN(auto session, TlsSession::Server(*context, fd));
//   RETURN_IF_ERROR(CompleteHandshake(*session, deadline));
//   short wait = 0;
//   ssize_t n = session->Read(buffer, size, &wait);  // wait: POLLIN / POLLOUT / 0
//
// Certificates: a server presents its certificate (with any chain that follows it in
// the PEM) and does not ask clients for one (the cluster token or the API key
// authenticates them); a client trusts only the CAs it is given and checks that the
// server's certificate names the host it dialled (an IP address or a DNS name, as a
// subjectAltName). TLS 1.2 or later.
//
// Writes never raise SIGPIPE (the socket is driven through send(MSG_NOSIGNAL)).
//
// Thread safety: a TlsContext is immutable and may be shared by any number of sessions
// on any threads; a TlsSession is used by one thread at a time, like its socket.
#ifndef LOCKSTEP_RUNTIME_SECURITY_TLS_SESSION_H_
#define LOCKSTEP_RUNTIME_SECURITY_TLS_SESSION_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct ssl_ctx_st;
struct ssl_st;

namespace lockstep::security {

class TlsContext {
 public:
  // A server's context: presents `cert_pem` (the first certificate is this node's, any
  // after it its chain) with `key_pem`. InvalidArgument naming what does not parse, or
  // when the key does not belong to the certificate.
  static absl::StatusOr<std::shared_ptr<const TlsContext>> ForServer(absl::string_view cert_pem,
                                                                     absl::string_view key_pem);
  // A client's context: servers must present a certificate signed by a CA in `ca_pem`.
  static absl::StatusOr<std::shared_ptr<const TlsContext>> ForClient(absl::string_view ca_pem);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* get() const { return ctx_; }

 private:
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;  // owned
};

class TlsSession {
 public:
  // A session over `fd` (connected, non-blocking; the caller owns and closes it, after
  // the session). The handshake has not run yet.
  static absl::StatusOr<std::unique_ptr<TlsSession>> Server(const TlsContext& context, int fd);
  // The client side; the server's certificate must name `host`.
  static absl::StatusOr<std::unique_ptr<TlsSession>> Client(const TlsContext& context, int fd,
                                                            const std::string& host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  int fd() const { return fd_; }

  // One step of the handshake: true when it is complete. False with `*wait` set to
  // POLLIN or POLLOUT when it needs the socket (poll, then call again), or with
  // `*wait` 0 when it failed (`error()` says why, e.g. the certificate check).
  bool Handshake(short* wait);

  // Like recv and send: the bytes moved (> 0); 0 when the peer closed the connection
  // (Read); -1 with `*wait` POLLIN or POLLOUT when it would block (poll, then call
  // again with the same arguments), or -1 with `*wait` 0 on an error (`error()`).
  ssize_t Read(void* data, size_t size, short* wait);
  ssize_t Write(const void* data, size_t size, short* wait);

  // Decrypted bytes Read returns without touching the socket (poll does not see them).
  bool HasPending() const;

  // Sends the close_notify alert if the socket takes it now; never waits.
  void Close();

  // Why the last failed operation failed.
  const std::string& error() const { return error_; }

 private:
  TlsSession(ssl_st* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  // Classifies a result <= 0 of an SSL_* call: sets `*wait`, or `error_` when it failed.
  void Failed(int result, short* wait);

  ssl_st* ssl_;  // owned
  const int fd_;
  std::string error_;
};

// Runs the handshake to its end, polling the session's socket as it asks. Errors:
// Unavailable with the reason (a certificate that does not check, a peer that does not
// speak TLS or closed the connection), DeadlineExceeded at `deadline`, Cancelled when
// `stop` (checked every 20 ms; may be empty) holds.
absl::Status CompleteHandshake(TlsSession& session, absl::Time deadline,
                               const std::function<bool()>& stop = nullptr);

}  // namespace lockstep::security

#endif  // LOCKSTEP_RUNTIME_SECURITY_TLS_SESSION_H_
