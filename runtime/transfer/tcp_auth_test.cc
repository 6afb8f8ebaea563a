#include "runtime/transfer/tcp_auth.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/kv_transfer.pb.h"
#include "runtime/security/cluster_security.h"
#include "runtime/transfer/tcp_data_server.h"
#include "runtime/transfer/tcp_wire.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

// A data-plane server of a cluster whose token is "cluster-token"; every pull that gets
// through is refused with NotFound by the handler, which counts them.
class TcpAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    security::ClusterSecurity cluster;
    cluster.cluster_token = "cluster-token";
    security::ScopedClusterSecurity scoped(cluster);  // the server captures it at start
    absl::StatusOr<std::unique_ptr<TcpDataServer>> server = TcpDataServer::Start(
        "127.0.0.1", [this](const lockstep::v1::PullRequest&, absl::Time, ChunkSink&) {
          handled_.fetch_add(1);
          return absl::NotFoundError("no such claim");
        });
    ASSERT_THAT(server.status(), IsOk());
    server_ = *std::move(server);
  }

  TcpSocket Connect() {
    absl::StatusOr<TcpSocket> socket = ConnectTcp(server_->address(), deadline_);
    EXPECT_THAT(socket.status(), IsOk());
    return socket.ok() ? *std::move(socket) : TcpSocket();
  }

  // Sends one pull request and reads the status frame that ends it.
  absl::Status Pull(const TcpSocket& socket) {
    const std::string bytes = lockstep::v1::PullRequest().SerializeAsString();
    RequestPrefix prefix;
    prefix.request_bytes = static_cast<uint32_t>(bytes.size());
    prefix.timeout_ms = 10'000;
    if (absl::Status s = SendAll(socket, &prefix, sizeof(prefix), deadline_, nullptr); !s.ok()) {
      return s;
    }
    if (absl::Status s = SendAll(socket, bytes.data(), bytes.size(), deadline_, nullptr); !s.ok()) {
      return s;
    }
    FrameHeader frame;
    if (absl::Status s = RecvAll(socket, &frame, sizeof(frame), deadline_, nullptr); !s.ok()) {
      return s;
    }
    std::string text(frame.size, '\0');
    if (absl::Status s = RecvAll(socket, text.data(), text.size(), deadline_, nullptr); !s.ok()) {
      return s;
    }
    return StatusFromFrame(frame, text);
  }

  static bool Closed(const TcpSocket& socket, absl::Time deadline) {
    char byte;
    return absl::IsUnavailable(RecvAll(socket, &byte, 1, deadline, nullptr));
  }

  const absl::Time deadline_ = absl::Now() + absl::Seconds(30);
  std::atomic<int> handled_{0};
  std::unique_ptr<TcpDataServer> server_;
};

TEST_F(TcpAuthTest, PullWithoutTokenIsRefusedAndClosed) {
  TcpSocket socket = Connect();
  EXPECT_THAT(Pull(socket), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no cluster token")));
  EXPECT_TRUE(Closed(socket, deadline_));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(TcpAuthTest, WrongTokenIsRefusedAndClosed) {
  TcpSocket socket = Connect();
  ASSERT_THAT(SendTcpToken(socket, "cluster-tokem", deadline_), IsOk());
  EXPECT_THAT(Pull(socket),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("wrong cluster token")));
  EXPECT_TRUE(Closed(socket, deadline_));
  EXPECT_EQ(handled_.load(), 0);
}

TEST_F(TcpAuthTest, RightTokenServesPullsOnTheConnection) {
  TcpSocket socket = Connect();
  ASSERT_THAT(SendTcpToken(socket, "cluster-token", deadline_), IsOk());
  for (int i = 1; i <= 2; ++i) {
    EXPECT_THAT(Pull(socket), StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such claim")));
    EXPECT_EQ(handled_.load(), i);
  }
}

TEST_F(TcpAuthTest, OversizedTokenIsRefused) {
  TcpSocket socket = Connect();
  RequestPrefix prefix;
  prefix.magic = kTcpAuthMagic;
  prefix.request_bytes = kMaxTcpTokenBytes + 1;
  ASSERT_THAT(SendAll(socket, &prefix, sizeof(prefix), deadline_, nullptr), IsOk());
  FrameHeader frame;
  ASSERT_THAT(RecvAll(socket, &frame, sizeof(frame), deadline_, nullptr), IsOk());
  std::string text(frame.size, '\0');
  ASSERT_THAT(RecvAll(socket, text.data(), text.size(), deadline_, nullptr), IsOk());
  EXPECT_THAT(StatusFromFrame(frame, text), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(handled_.load(), 0);
}

}  // namespace
}  // namespace lockstep::transfer
