#include "runtime/comm/rendezvous_service.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/rendezvous_client.h"

namespace lockstep::comm {
namespace {

using ::lockstep::testing::IsOk;
using ::lockstep::testing::StatusIs;
using ::testing::HasSubstr;

class RendezvousServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<RendezvousServer>> server = RendezvousServer::Start();
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
  }

  std::unique_ptr<RendezvousClient> Client(std::string key_space = "deployment-a") {
    return RendezvousClient::Connect(server_->address(), std::move(key_space));
  }

  std::unique_ptr<RendezvousServer> server_;
};

TEST_F(RendezvousServiceTest, SetThenGetReturnsBinaryValue) {
  auto client = Client();
  const std::string value("\0\xff\x01 binary", 10);
  ASSERT_THAT(client->Set("rank/0", value), IsOk());
  absl::StatusOr<std::string> got = client->Get("rank/0");
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ(*got, value);
  ASSERT_THAT(client->Set("rank/0", "replaced"), IsOk());
  EXPECT_EQ(*client->Get("rank/0"), "replaced");
  EXPECT_EQ(server_->service().size(), 1u);
}

TEST_F(RendezvousServiceTest, MissingKeyIsNotFound) {
  EXPECT_THAT(Client()->Get("nope"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("'nope'")));
}

TEST_F(RendezvousServiceTest, KeySpacesAreIndependent) {
  auto a = Client("deployment-a");
  auto b = Client("deployment-b");
  ASSERT_THAT(a->Set("rank/0", "a0"), IsOk());
  EXPECT_THAT(b->Get("rank/0"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_THAT(b->Set("rank/0", "b0"), IsOk());
  EXPECT_EQ(*a->Get("rank/0"), "a0");
  EXPECT_EQ(*b->Get("rank/0"), "b0");
}

TEST_F(RendezvousServiceTest, WaitReturnsOnceAnotherClientSetsEveryKey) {
  auto waiter = Client();
  absl::Status waited;
  std::thread wait_thread([&] { waited = waiter->Wait({"rank/0", "rank/1"}, absl::Seconds(20)); });
  auto setter = Client();
  ASSERT_THAT(setter->Set("rank/1", "x"), IsOk());
  ASSERT_THAT(setter->Set("rank/0", "y"), IsOk());
  wait_thread.join();
  EXPECT_THAT(waited, IsOk());
}

TEST_F(RendezvousServiceTest, WaitTimesOutNamingTheMissingKeys) {
  auto client = Client();
  ASSERT_THAT(client->Set("rank/0", "x"), IsOk());
  EXPECT_THAT(client->Wait({"rank/0", "rank/3"}, absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("rank/3")));
}

TEST_F(RendezvousServiceTest, BadInputIsRefusedAndTheServiceKeepsServing) {
  auto client = Client();
  EXPECT_THAT(client->Set("", "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(client->Set("big", std::string((1 << 20) + 1, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than")));
  EXPECT_THAT(client->Set(std::string(2000, 'k'), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("longer than")));
  EXPECT_THAT(client->Set("ok", "v"), IsOk());
}

TEST_F(RendezvousServiceTest, ShutdownEndsPendingWaits) {
  auto client = Client();
  absl::Status waited;
  std::thread wait_thread([&] { waited = client->Wait({"never"}, absl::Seconds(30)); });
  // A Set that completes proves the service is serving; the wait may or may not have
  // reached the server yet: either way it must end with an error, not after 30 s.
  ASSERT_THAT(client->Set("other", "x"), IsOk());
  server_->service().Shutdown();
  wait_thread.join();
  EXPECT_THAT(waited, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

TEST(RendezvousServiceOptionsTest, WaitIsCappedByMaxWait) {
  RendezvousServiceOptions options;
  options.max_wait = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<RendezvousServer>> server =
      RendezvousServer::Start("127.0.0.1:0", options);
  ASSERT_THAT(server, IsOk());
  RendezvousServiceImpl& service = (*server)->service();
  grpc::ServerContext context;
  lockstep::v1::RendezvousWaitRequest request;
  request.add_keys("never");
  request.set_timeout_ms(absl::ToInt64Milliseconds(absl::Hours(1)));
  lockstep::v1::RendezvousWaitResponse response;
  // Called directly: the service must return by itself after max_wait.
  EXPECT_EQ(service.Wait(&context, &request, &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
}

// docs/security.md §3: beyond max_keys (2^20) a new key is RESOURCE_EXHAUSTED, while a
// key already held may still be set again and read.
TEST(RendezvousServiceOptionsTest, KeysBeyondMaxKeysAreRefused) {
  RendezvousServiceOptions options;
  options.max_keys = 3;
  absl::StatusOr<std::unique_ptr<RendezvousServer>> server =
      RendezvousServer::Start("127.0.0.1:0", options);
  ASSERT_THAT(server, IsOk());
  auto client = RendezvousClient::Connect((*server)->address(), "deployment-a");
  EXPECT_THAT(client->Set("a", "1"), IsOk());
  EXPECT_THAT(client->Set("b", "2"), IsOk());
  EXPECT_THAT(client->Set("c", "3"), IsOk());
  EXPECT_THAT(client->Set("d", "4"), StatusIs(absl::StatusCode::kResourceExhausted,
                                              HasSubstr("holds 3 keys already")));
  // Another key space shares the bound.
  EXPECT_THAT(RendezvousClient::Connect((*server)->address(), "deployment-b")->Set("a", "1"),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(client->Set("a", "again"), IsOk());
  absl::StatusOr<std::string> value = client->Get("a");
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(*value, "again");
}

}  // namespace
}  // namespace lockstep::comm
