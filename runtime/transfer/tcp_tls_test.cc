// The TCP data plane with the cluster's TLS files (certificates made at test time): the
// token handshake and pulls run inside TLS; a plaintext peer, a server the cluster CA
// did not sign, a certificate for another host, and TLS to a plaintext data plane are
// all refused before any pull reaches the handler.
#include <atomic>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/testing/test_certs.h"
#include "runtime/security/tls_session.h"
#include "runtime/transfer/tcp_auth.h"
#include "runtime/transfer/tcp_data_server.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kToken[] = "cluster-token";

class TcpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<security::TestCerts> certs = security::MakeTestCerts(::testing::TempDir());
    ASSERT_THAT(certs, IsOk());
    certs_ = *certs;
    cluster_ = certs_.Security(kToken);
    absl::StatusOr<std::shared_ptr<const security::TlsContext>> client =
        security::TlsContext::ForClient(cluster_.tls_ca_pem);
    ASSERT_THAT(client, IsOk());
    client_tls_ = *client;
  }

  // A data plane started under `security`; the handler counts the pulls that reach it.
  std::unique_ptr<TcpDataServer> StartServer(const security::ClusterSecurity& security) {
    security::ScopedClusterSecurity scoped(security);  // the server captures it at start
    absl::StatusOr<std::unique_ptr<TcpDataServer>> server = TcpDataServer::Start(
        "127.0.0.1", [this](const lockstep::v1::PullRequest&, absl::Time, ChunkSink&) {
          handled_.fetch_add(1);
          return absl::NotFoundError("no such claim");
        });
    EXPECT_THAT(server, IsOk());
    return server.ok() ? *std::move(server) : nullptr;
  }

  TcpSocket Connect(const TcpDataServer& server) {
    absl::StatusOr<TcpSocket> socket = ConnectTcp(server.address(), deadline_);
    EXPECT_THAT(socket, IsOk());
    return socket.ok() ? *std::move(socket) : TcpSocket();
  }

  // Sends one pull request and reads the status frame that ends it.
  absl::Status Pull(const TcpSocket& socket) {
    const std::string bytes = lockstep::v1::PullRequest().SerializeAsString();
    RequestPrefix prefix;
    prefix.request_bytes = static_cast<uint32_t>(bytes.size());
    prefix.timeout_ms = 10'000;
    if (absl::Status s = SendAll(socket, {{&prefix, sizeof(prefix)},
                                          {const_cast<char*>(bytes.data()), bytes.size()}},
                                 deadline_, nullptr);
        !s.ok()) {
      return s;
    }
    FrameHeader frame;
    if (absl::Status s = RecvAll(socket, &frame, sizeof(frame), deadline_, nullptr); !s.ok()) {
      return s;
    }
    if (frame.kind != FrameKind::kStatus || frame.size > kMaxTcpStatusBytes) {
      return absl::DataLossError("not a status frame");
    }
    std::string text(frame.size, '\0');
    if (absl::Status s = RecvAll(socket, text.data(), text.size(), deadline_, nullptr); !s.ok()) {
      return s;
    }
    return StatusFromFrame(frame, text);
  }

  const absl::Time deadline_ = absl::Now() + absl::Seconds(30);
  security::TestCerts certs_;
  security::ClusterSecurity cluster_;
  std::shared_ptr<const security::TlsContext> client_tls_;
  std::atomic<int> handled_{0};
};

TEST_F(TcpTlsTest, TokenAndPullsRunInsideTls) {
  std::unique_ptr<TcpDataServer> server = StartServer(cluster_);
  ASSERT_NE(server, nullptr);
  TcpSocket socket = Connect(*server);
  ASSERT_THAT(StartTlsClient(socket, *client_tls_, "127.0.0.1", deadline_), IsOk());
  ASSERT_NE(socket.tls(), nullptr);
  ASSERT_THAT(SendTcpToken(socket, kToken, deadline_), IsOk());
  for (int i = 1; i <= 2; ++i) {
    EXPECT_THAT(Pull(socket), StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such claim")));
    EXPECT_EQ(handled_.load(), i);
  }
  // Inside TLS the token is still checked.
  TcpSocket wrong = Connect(*server);
  ASSERT_THAT(StartTlsClient(wrong, *client_tls_, "localhost", deadline_), IsOk());
  ASSERT_THAT(SendTcpToken(wrong, "cluster-tokem", deadline_), IsOk());
  EXPECT_THAT(Pull(wrong),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("wrong cluster token")));
  EXPECT_EQ(handled_.load(), 2);
}

TEST_F(TcpTlsTest, APlaintextPeerIsClosedUnserved) {
  std::unique_ptr<TcpDataServer> server = StartServer(cluster_);
  ASSERT_NE(server, nullptr);
  TcpSocket socket = Connect(*server);
  ASSERT_THAT(SendTcpToken(socket, kToken, deadline_), IsOk());
  // No status frame comes back in clear: the server closed the connection.
  EXPECT_THAT(Pull(socket), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(handled_.load(), 0);
  // It keeps serving TLS pullers.
  TcpSocket good = Connect(*server);
  ASSERT_THAT(StartTlsClient(good, *client_tls_, "127.0.0.1", deadline_), IsOk());
  ASSERT_THAT(SendTcpToken(good, kToken, deadline_), IsOk());
  EXPECT_THAT(Pull(good), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(TcpTlsTest, AServerTheClusterCaDidNotSignIsRefused) {
  absl::StatusOr<security::ClusterSecurity> stranger = security::LoadClusterSecurity(
      {.tls_cert_file = certs_.other_cert_file, .tls_key_file = certs_.other_key_file,
       .tls_ca_file = certs_.other_ca_file});
  ASSERT_THAT(stranger, IsOk());
  stranger->cluster_token = kToken;
  std::unique_ptr<TcpDataServer> server = StartServer(*stranger);
  ASSERT_NE(server, nullptr);
  TcpSocket socket = Connect(*server);
  EXPECT_THAT(StartTlsClient(socket, *client_tls_, "127.0.0.1", deadline_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate")));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(TcpTlsTest, ACertificateForAnotherHostIsRefused) {
  std::unique_ptr<TcpDataServer> server = StartServer(cluster_);
  ASSERT_NE(server, nullptr);
  TcpSocket socket = Connect(*server);
  EXPECT_THAT(StartTlsClient(socket, *client_tls_, "10.1.2.3", deadline_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate")));
  TcpSocket named = Connect(*server);
  EXPECT_THAT(StartTlsClient(named, *client_tls_, "kv.example.com", deadline_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate")));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(TcpTlsTest, TlsToAPlaintextDataPlaneFails) {
  security::ClusterSecurity plain;
  plain.cluster_token = kToken;
  std::unique_ptr<TcpDataServer> server = StartServer(plain);
  ASSERT_NE(server, nullptr);
  TcpSocket socket = Connect(*server);
  EXPECT_THAT(StartTlsClient(socket, *client_tls_, "127.0.0.1", deadline_),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("TLS handshake")));
  EXPECT_EQ(handled_.load(), 0);
}

}  // namespace
}  // namespace lockstep::transfer
