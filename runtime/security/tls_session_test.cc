// TlsSession over a connected pair of non-blocking sockets, with certificates made at
// test time: the handshake and data both ways, and every way it must refuse.
#include "runtime/security/tls_session.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/secret.h"
#include "runtime/security/testing/test_certs.h"

namespace lockstep::security {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path);
  return text.ok() ? *text + "\n" : std::string();
}

// A connected pair of non-blocking stream sockets.
struct SocketPair {
  SocketPair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    for (int fd : fds) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  ~SocketPair() {
    for (int fd : fds) ::close(fd);
  }
  int fds[2] = {-1, -1};
};

// Moves all of `data` (or reads `size` bytes) through `session`, polling as it asks.
absl::Status WriteAll(TlsSession& session, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    short wait = 0;
    const ssize_t n = session.Write(data.data() + done, data.size() - done, &wait);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (wait == 0) return absl::UnavailableError(session.error());
    pollfd p{session.fd(), wait, 0};
    ::poll(&p, 1, 10'000);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAll(TlsSession& session, size_t size) {
  std::string out(size, '\0');
  for (size_t done = 0; done < size;) {
    short wait = 0;
    const ssize_t n = session.Read(out.data() + done, size - done, &wait);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return absl::UnavailableError("closed");
    if (wait == 0) return absl::UnavailableError(session.error());
    pollfd p{session.fd(), wait, 0};
    ::poll(&p, 1, 10'000);
  }
  return out;
}

class TlsSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestCerts> certs = MakeTestCerts(::testing::TempDir());
    LOCKSTEP_ASSERT_OK(certs.status());
    certs_ = *certs;
    absl::StatusOr<std::shared_ptr<const TlsContext>> server =
        TlsContext::ForServer(Read(certs_.cert_file), Read(certs_.key_file));
    LOCKSTEP_ASSERT_OK(server.status());
    server_context_ = *server;
    absl::StatusOr<std::shared_ptr<const TlsContext>> client =
        TlsContext::ForClient(Read(certs_.ca_file));
    LOCKSTEP_ASSERT_OK(client.status());
    client_context_ = *client;
  }

  // Runs the server's handshake on a thread and the client's here; both outcomes.
  std::pair<absl::Status, absl::Status> Handshake(const TlsContext& server_context,
                                                  const std::string& host) {
    return Handshake(server_context, host, pair_);
  }
  std::pair<absl::Status, absl::Status> Handshake(const TlsContext& server_context,
                                                  const std::string& host, SocketPair& pair) {
    absl::StatusOr<std::unique_ptr<TlsSession>> server =
        TlsSession::Server(server_context, pair.fds[0]);
    absl::StatusOr<std::unique_ptr<TlsSession>> client =
        TlsSession::Client(*client_context_, pair.fds[1], host);
    EXPECT_THAT(server.status(), IsOk());
    EXPECT_THAT(client.status(), IsOk());
    if (!server.ok() || !client.ok()) return {server.status(), client.status()};
    server_ = *std::move(server);
    client_ = *std::move(client);
    absl::Status server_status;
    std::thread accept([&] { server_status = CompleteHandshake(*server_, deadline_); });
    absl::Status client_status = CompleteHandshake(*client_, deadline_);
    if (!client_status.ok()) ::shutdown(pair.fds[1], SHUT_RDWR);  // ends the server's wait
    accept.join();
    return {server_status, client_status};
  }

  const absl::Time deadline_ = absl::Now() + absl::Seconds(30);
  TestCerts certs_;
  std::shared_ptr<const TlsContext> server_context_;
  std::shared_ptr<const TlsContext> client_context_;
  SocketPair pair_;
  std::unique_ptr<TlsSession> server_;
  std::unique_ptr<TlsSession> client_;
};

TEST_F(TlsSessionTest, HandshakeAndDataBothWays) {
  const auto [server, client] = Handshake(*server_context_, "127.0.0.1");
  ASSERT_THAT(server, IsOk());
  ASSERT_THAT(client, IsOk());
  // More than the socket buffers hold: the writes are partial and wait for the reader.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + i / 7);
  absl::Status written;
  std::thread writer([&] { written = WriteAll(*client_, big); });
  absl::StatusOr<std::string> got = ReadAll(*server_, big.size());
  writer.join();
  EXPECT_THAT(written, IsOk());
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_TRUE(*got == big);

  ASSERT_THAT(WriteAll(*server_, "reply"), IsOk());
  absl::StatusOr<std::string> reply = ReadAll(*client_, 5);
  ASSERT_THAT(reply.status(), IsOk());
  EXPECT_EQ(*reply, "reply");

  // The peer's close reads as 0 bytes.
  client_->Close();
  ::shutdown(pair_.fds[1], SHUT_WR);
  char byte;
  short wait = 0;
  ssize_t n;
  while ((n = server_->Read(&byte, 1, &wait)) < 0 && wait != 0) {
    pollfd p{server_->fd(), wait, 0};
    ::poll(&p, 1, 10'000);
  }
  EXPECT_EQ(n, 0);
}

TEST_F(TlsSessionTest, TheServerNameIsChecked) {
  const auto [server, client] = Handshake(*server_context_, "localhost");
  EXPECT_THAT(client, IsOk());
  SocketPair other;
  const auto [server2, wrong] = Handshake(*server_context_, "example.com", other);
  EXPECT_THAT(wrong, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate")));
  EXPECT_FALSE(server2.ok());
}

TEST_F(TlsSessionTest, AServerTheClusterCaDidNotSignIsRefused) {
  absl::StatusOr<std::shared_ptr<const TlsContext>> stranger =
      TlsContext::ForServer(Read(certs_.other_cert_file), Read(certs_.other_key_file));
  LOCKSTEP_ASSERT_OK(stranger.status());
  const auto [server, client] = Handshake(**stranger, "127.0.0.1");
  EXPECT_THAT(client, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate")));
  EXPECT_FALSE(server.ok());
}

TEST_F(TlsSessionTest, APlaintextPeerFailsTheHandshake) {
  absl::StatusOr<std::unique_ptr<TlsSession>> server =
      TlsSession::Server(*server_context_, pair_.fds[0]);
  LOCKSTEP_ASSERT_OK(server.status());
  const std::string plain = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(pair_.fds[1], plain.data(), plain.size(), 0),
            static_cast<ssize_t>(plain.size()));
  EXPECT_THAT(CompleteHandshake(**server, deadline_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("TLS handshake")));
}

TEST_F(TlsSessionTest, ASilentPeerEndsAtTheDeadlineOrStop) {
  absl::StatusOr<std::unique_ptr<TlsSession>> server =
      TlsSession::Server(*server_context_, pair_.fds[0]);
  LOCKSTEP_ASSERT_OK(server.status());
  EXPECT_THAT(CompleteHandshake(**server, absl::Now() + absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(CompleteHandshake(**server, deadline_, [] { return true; }),
              StatusIs(absl::StatusCode::kCancelled));
}

TEST_F(TlsSessionTest, BadFilesAreErrors) {
  EXPECT_THAT(TlsContext::ForServer("not a certificate", Read(certs_.key_file)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("certificate")));
  EXPECT_THAT(TlsContext::ForServer(Read(certs_.cert_file), "not a key"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key")));
  EXPECT_THAT(TlsContext::ForServer(Read(certs_.cert_file), Read(certs_.other_key_file)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not belong")));
  EXPECT_THAT(TlsContext::ForClient("not a CA"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lockstep::security
