#include "runtime/security/tls_session.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockstep::security {
namespace {

// The OpenSSL errors queued on this thread, oldest first, and clears them.
std::string DrainErrors() {
  std::string out;
  while (const unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof(text));
    // "error:0A000086:SSL routines::certificate verify failed": keep the reason.
    const char* reason = std::strrchr(text, ':');
    absl::StrAppend(&out, out.empty() ? "" : "; ", reason != nullptr ? reason + 1 : text);
  }
  return out;
}

absl::Status OpenSslError(absl::string_view what) {
  const std::string errors = DrainErrors();
  return absl::InvalidArgumentError(
      absl::StrCat(what, errors.empty() ? "" : ": ", errors.empty() ? "" : errors));
}

// A BIO on the caller's socket that writes with MSG_NOSIGNAL (OpenSSL's own socket BIO
// uses write(), which raises SIGPIPE on a connection the peer reset).
int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  ssize_t n;
  do {
    n = ::send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  ssize_t n;
  do {
    n = ::recv(fd, data, static_cast<size_t>(size), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(bio);
  return static_cast<int>(n);
}

long BioCtrl(BIO* /*bio*/, int command, long /*num*/, void* /*ptr*/) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;  // writes go straight to the socket
}

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int BioDestroy(BIO* /*bio*/) { return 1; }  // the socket is the caller's

BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "lockstep socket");
    BIO_meth_set_write(m, &BioWrite);
    BIO_meth_set_read(m, &BioRead);
    BIO_meth_set_ctrl(m, &BioCtrl);
    BIO_meth_set_create(m, &BioCreate);
    BIO_meth_set_destroy(m, &BioDestroy);
    return m;
  }();
  return method;
}

// What both sides set: TLS 1.2+, send() semantics for writes, no session tickets (no
// peer resumes), and a peer's close without close_notify read as a close (every
// protocol here is length-framed, so a cut is still noticed).
absl::StatusOr<SSL_CTX*> NewContext(const SSL_METHOD* method) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(method);
  if (ctx == nullptr) return OpenSslError("cannot create a TLS context");
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(ctx, 0);
  return ctx;
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

BioPtr MemoryBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

absl::Status UseCertificateChain(SSL_CTX* ctx, absl::string_view cert_pem) {
  BioPtr bio = MemoryBio(cert_pem);
  X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
  if (cert == nullptr) return OpenSslError("the TLS certificate is not a PEM certificate");
  const int used = SSL_CTX_use_certificate(ctx, cert);
  X509_free(cert);
  if (used != 1) return OpenSslError("the TLS certificate cannot be used");
  while (X509* link = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (SSL_CTX_add0_chain_cert(ctx, link) != 1) {  // takes `link`
      X509_free(link);
      return OpenSslError("the TLS certificate's chain cannot be used");
    }
  }
  ERR_clear_error();  // the end of the PEM text
  return absl::OkStatus();
}

bool IsIpAddress(const std::string& host) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address) == 1;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::ForServer(absl::string_view cert_pem,
                                                                        absl::string_view key_pem) {
  absl::StatusOr<SSL_CTX*> ctx = NewContext(TLS_server_method());
  if (!ctx.ok()) return ctx.status();
  std::shared_ptr<const TlsContext> context(new TlsContext(*ctx));
  if (absl::Status s = UseCertificateChain(*ctx, cert_pem); !s.ok()) return s;
  BioPtr bio = MemoryBio(key_pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr) return OpenSslError("the TLS key is not a PEM private key");
  const int used = SSL_CTX_use_PrivateKey(*ctx, key);
  EVP_PKEY_free(key);
  if (used != 1 || SSL_CTX_check_private_key(*ctx) != 1) {
    return OpenSslError("the TLS key does not belong to the certificate");
  }
  return context;
}

absl::StatusOr<std::shared_ptr<const TlsContext>> TlsContext::ForClient(absl::string_view ca_pem) {
  absl::StatusOr<SSL_CTX*> ctx = NewContext(TLS_client_method());
  if (!ctx.ok()) return ctx.status();
  std::shared_ptr<const TlsContext> context(new TlsContext(*ctx));
  BioPtr bio = MemoryBio(ca_pem);
  STACK_OF(X509_INFO)* infos = PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr);
  if (infos == nullptr) return OpenSslError("the TLS CA is not PEM");
  X509_STORE* store = SSL_CTX_get_cert_store(*ctx);
  int added = 0;
  for (int i = 0; i < sk_X509_INFO_num(infos); ++i) {
    X509_INFO* info = sk_X509_INFO_value(infos, i);
    if (info->x509 != nullptr && X509_STORE_add_cert(store, info->x509) == 1) ++added;
  }
  sk_X509_INFO_pop_free(infos, X509_INFO_free);
  if (added == 0) return OpenSslError("the TLS CA holds no certificate");
  SSL_CTX_set_verify(*ctx, SSL_VERIFY_PEER, nullptr);
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::Server(const TlsContext& context, int fd) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context.get());
  if (ssl == nullptr) return OpenSslError("cannot create a TLS session");
  std::unique_ptr<TlsSession> session(new TlsSession(ssl, fd));
  BIO* bio = BIO_new(SocketBioMethod());
  if (bio == nullptr) return OpenSslError("cannot create a TLS session");
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl, bio, bio);  // the session owns it
  SSL_set_accept_state(ssl);
  return session;
}

absl::StatusOr<std::unique_ptr<TlsSession>> TlsSession::Client(const TlsContext& context, int fd,
                                                               const std::string& host) {
  absl::StatusOr<std::unique_ptr<TlsSession>> session = Server(context, fd);
  if (!session.ok()) return session.status();
  SSL* ssl = (*session)->ssl_;
  SSL_set_connect_state(ssl);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (IsIpAddress(host)) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) != 1) {
      return OpenSslError(absl::StrCat("cannot check certificates for ", host));
    }
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set_tlsext_host_name(ssl, host.c_str()) != 1 || SSL_set1_host(ssl, host.c_str()) != 1) {
      return OpenSslError(absl::StrCat("cannot check certificates for ", host));
    }
  }
  return session;
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

void TlsSession::Failed(int result, short* wait) {
  const int code = SSL_get_error(ssl_, result);
  *wait = 0;
  if (code == SSL_ERROR_WANT_READ) {
    *wait = POLLIN;
    return;
  }
  if (code == SSL_ERROR_WANT_WRITE) {
    *wait = POLLOUT;
    return;
  }
  const int saved_errno = errno;
  std::string errors = DrainErrors();
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    errors = absl::StrCat("the peer's certificate: ", X509_verify_cert_error_string(verify));
  } else if (code == SSL_ERROR_SYSCALL && errors.empty()) {
    errors = saved_errno != 0 ? std::strerror(saved_errno) : "the peer closed the connection";
  } else if (errors.empty()) {
    errors = absl::StrCat("TLS error ", code);
  }
  error_ = std::move(errors);
}

bool TlsSession::Handshake(short* wait) {
  ERR_clear_error();
  errno = 0;
  const int result = SSL_do_handshake(ssl_);
  if (result == 1) return true;
  Failed(result, wait);
  return false;
}

ssize_t TlsSession::Read(void* data, size_t size, short* wait) {
  ERR_clear_error();
  errno = 0;
  const int result = SSL_read(ssl_, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
  if (result > 0) return result;
  if (SSL_get_error(ssl_, result) == SSL_ERROR_ZERO_RETURN) return 0;
  Failed(result, wait);
  return -1;
}

ssize_t TlsSession::Write(const void* data, size_t size, short* wait) {
  ERR_clear_error();
  errno = 0;
  const int result = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
  if (result > 0) return result;
  Failed(result, wait);
  return -1;
}

bool TlsSession::HasPending() const { return SSL_pending(ssl_) > 0; }

void TlsSession::Close() {
  ERR_clear_error();
  if (SSL_is_init_finished(ssl_)) SSL_shutdown(ssl_);
  ERR_clear_error();
}

absl::Status CompleteHandshake(TlsSession& session, absl::Time deadline,
                               const std::function<bool()>& stop) {
  for (;;) {
    short wait = 0;
    if (session.Handshake(&wait)) return absl::OkStatus();
    if (wait == 0) return absl::UnavailableError(absl::StrCat("TLS handshake: ", session.error()));
    for (;;) {
      if (stop && stop()) return absl::CancelledError("stopped during the TLS handshake");
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError("the TLS handshake did not finish in time");
      }
      const absl::Duration slice = stop ? std::min(left, absl::Milliseconds(20)) : left;
      pollfd p{session.fd(), wait, 0};
      const int ready =
          ::poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(slice) + 1,
                                                           INT_MAX)));
      if (ready < 0 && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("TLS handshake: poll: ", std::strerror(errno)));
      }
      if (ready > 0) break;
    }
  }
}

}  // namespace lockstep::security
