#include "runtime/transfer/data_connections.h"

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kvcache/block_copier.h"
#include "runtime/transfer/kv_transfer_server.h"

namespace lockstep::transfer {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;

class DataConnectionsTest : public ::testing::Test {
 protected:
  std::unique_ptr<KvTransferServer> Serve(bool tcp_data_plane) {
    KvDescriptor descriptor;
    descriptor.model = "m";
    descriptor.target =
        kv::BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .tokens_per_block = 16};
    KvTransferServerOptions options;
    options.tcp_data_plane = tcp_data_plane;
    absl::StatusOr<std::unique_ptr<KvTransferServer>> server = KvTransferServer::Start(
        options, descriptor, KvCopiers{&copier_, nullptr}, SendClaims::Create(&clock_, events_));
    EXPECT_THAT(server.status(), IsOk());
    return server.ok() ? std::move(*server) : nullptr;
  }

  static std::unique_ptr<RawPullStub> Stub(const std::string& address) {
    return std::make_unique<RawPullStub>(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }

  absl::Time Deadline() const { return absl::Now() + absl::Seconds(20); }

  FakeClock clock_;
  std::vector<std::byte> slab_ = std::vector<std::byte>(4 * 1024);
  kv::HostBlockCopier copier_{
      slab_.data(),
      kv::BlockLayout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .tokens_per_block = 16},
      4};
  std::shared_ptr<EventQueue> events_ = std::make_shared<EventQueue>();
  DataConnections connections_;
};

TEST_F(DataConnectionsTest, AsksOnceThenReusesReturnedConnections) {
  std::unique_ptr<KvTransferServer> server = Serve(/*tcp_data_plane=*/true);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<RawPullStub> stub = Stub(server->address());
  absl::StatusOr<DataConnections::Lease> first =
      connections_.Take(server->address(), *stub, Deadline(), /*fresh=*/false);
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_FALSE(first->pooled);
  const int fd = first->socket.fd();
  connections_.Return(server->address(), std::move(first->socket));
  absl::StatusOr<DataConnections::Lease> again =
      connections_.Take(server->address(), *stub, Deadline(), /*fresh=*/false);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_TRUE(again->pooled);
  EXPECT_EQ(again->socket.fd(), fd);
  connections_.Return(server->address(), std::move(again->socket));
  absl::StatusOr<DataConnections::Lease> fresh =
      connections_.Take(server->address(), *stub, Deadline(), /*fresh=*/true);
  ASSERT_THAT(fresh.status(), IsOk());
  EXPECT_FALSE(fresh->pooled);
}

TEST_F(DataConnectionsTest, PeerWithoutDataPlaneIsNotFound) {
  std::unique_ptr<KvTransferServer> server = Serve(/*tcp_data_plane=*/false);
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->tcp_address().empty());
  std::unique_ptr<RawPullStub> stub = Stub(server->address());
  for (int i = 0; i < 2; ++i) {  // asked, then remembered
    EXPECT_THAT(connections_.Take(server->address(), *stub, Deadline(), false).status(),
                StatusIs(absl::StatusCode::kNotFound));
  }
}

TEST_F(DataConnectionsTest, UnreachablePeerFailsByTheDeadline) {
  std::string address;
  {
    std::unique_ptr<KvTransferServer> server = Serve(/*tcp_data_plane=*/true);
    ASSERT_NE(server, nullptr);
    address = server->address();
  }  // gone
  std::unique_ptr<RawPullStub> stub = Stub(address);
  const absl::Status status =
      connections_.Take(address, *stub, absl::Now() + absl::Seconds(2), false).status();
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(absl::IsNotFound(status)) << status;
}

}  // namespace
}  // namespace lockstep::transfer
