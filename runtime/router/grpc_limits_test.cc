// RouterService.Generate and a client that stops reading its stream (docs/security.md
// §5): gRPC flow control stops the router's writes once the client's windows are full;
// the router then cancels the call after router.http_write_timeout_ms and the request on
// its worker, while other clients' streams go on.
#include <chrono>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;

class GrpcLimitsTest : public ::testing::Test {
 protected:
  void Start(int64_t write_timeout_ms) {
    config::DeploymentConfig config =
        testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
    config.router.http_write_timeout_ms = write_timeout_ms;
    // Far beyond the test's deadlines: only the write timeout can end a stuck stream.
    config.router.request_timeout_s = 600;
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    absl::StatusOr<std::unique_ptr<testing::FakeWorker>> worker =
        testing::StartWorker(*router_, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
    ASSERT_THAT(worker, IsOk());
    worker_ = *std::move(worker);
  }

  std::unique_ptr<v1::RouterService::Stub> Stub() {
    return v1::RouterService::NewStub(
        grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  static v1::RouterGenerateRequest Request(const std::string& text, int max_tokens) {
    v1::RouterGenerateRequest request;
    request.set_model(testing::kModel);
    request.set_text(text);
    request.mutable_sampling()->set_max_tokens(max_tokens);
    return request;
  }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<testing::FakeWorker> worker_;
};

TEST_F(GrpcLimitsTest, AClientThatStopsReadingIsCutWithoutStallingOthers) {
  Start(/*write_timeout_ms=*/500);
  // A long stream whose client never reads: once gRPC's flow-control windows are full
  // the router's write cannot go on (no BDP probing: the windows stay small).
  grpc::ChannelArguments small_windows;
  small_windows.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stuck_stub = v1::RouterService::NewStub(grpc::CreateCustomChannel(
      router_->grpc_address(), grpc::InsecureChannelCredentials(), small_windows));
  grpc::ClientContext stuck;
  stuck.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  std::unique_ptr<grpc::ClientReader<v1::RouterGenerateResponse>> reader =
      stuck_stub->Generate(&stuck, Request("s", 1000000));
  ASSERT_TRUE(lockstep::testing::PollUntil([&] { return !worker_->requests().empty(); }));

  // Meanwhile another client's stream completes.
  {
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto other = Stub()->Generate(&call, Request("other", 6));
    v1::RouterGenerateResponse response;
    std::string text;
    while (other->Read(&response)) text += response.text();
    const grpc::Status status = other->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(text, testing::FakeWorker::ExpectedText("other", 6));
  }
  // The stuck call is cancelled, and so is its request on the worker; the router holds
  // nothing of it any more (its flow and its place at the instance are gone).
  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(30)));
  EXPECT_TRUE(lockstep::testing::PollUntil([&] {
    return router_->flows().size() == 0 && router_->registry().Snapshot()[0].in_flight == 0;
  }));
  // (The client sees the status only once it reads what it was sent, or gives up.)
  stuck.TryCancel();
  EXPECT_FALSE(reader->Finish().ok());
}

}  // namespace
}  // namespace lockstep::router
