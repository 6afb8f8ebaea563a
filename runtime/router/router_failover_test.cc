// Failures around the router, end to end over real HTTP and gRPC: an instance that
// stops heartbeating, dies mid-stream, or reports no progress; a client that hangs up;
// a request that outlives its timeout. Every affected request ends with a clear error
// within its deadline, the instance gets no new requests, and it comes back when it
// registers again.
#include <thread>

#include "common/testing/poll_until.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/router.grpc.pb.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::lockstep::testing::IsOk;
using ::lockstep::testing::PollUntil;
using nlohmann::json;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::HttpResult;

std::string Body(const std::string& prompt, int max_tokens, bool stream) {
  return json{{"model", testing::kModel},
              {"prompt", prompt},
              {"max_tokens", max_tokens},
              {"stream", stream}}
      .dump();
}

// The error event of a failed stream.
json StreamError(const std::string& stream) {
  for (const std::string& data : testing::SseData(stream)) {
    json event = json::parse(data, nullptr, false);
    if (!event.is_discarded() && event.contains("error")) return event["error"];
  }
  return json();
}

class RouterFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(testing::TestConfig({{"agg0", InstanceRole::kAggregated}})); }

  void Start(const config::DeploymentConfig& config) {
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    http_ = std::make_unique<HttpClient>(router_->http_address());
    absl::StatusOr<std::unique_ptr<FakeWorker>> worker =
        testing::StartWorker(*router_, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
    ASSERT_THAT(worker, IsOk());
    worker_ = *std::move(worker);
  }

  // Runs a streaming request on another thread; `result()` waits for it.
  void StartStream(const std::string& prompt, int max_tokens) {
    stream_thread_ = std::thread([this, prompt, max_tokens] {
      stream_result_ = HttpClient(router_->http_address())
                           .PostStream("/v1/completions", Body(prompt, max_tokens, true));
    });
  }
  HttpResult& StreamResult() {
    stream_thread_.join();
    return stream_result_;
  }

  bool Healthy() { return router_->registry().IsHealthy("agg0"); }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<HttpClient> http_;
  std::unique_ptr<FakeWorker> worker_;
  std::thread stream_thread_;
  HttpResult stream_result_;
};

TEST_F(RouterFailoverTest, MissedHeartbeatsEndInFlightRequestsAndReRegistrationRestores) {
  worker_->SetStallAfter(2);
  StartStream("hb", 10);
  ASSERT_TRUE(worker_->AwaitStalled(1, absl::Seconds(10)));
  EXPECT_TRUE(Healthy());  // heartbeats keep it in while the request stalls
  worker_->StopHeartbeats();

  HttpResult& result = StreamResult();  // bounded by the client's 10 s read timeout
  EXPECT_EQ(result.status, 200);
  const json error = StreamError(result.body);
  ASSERT_TRUE(error.is_object()) << result.body;
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("instance agg0 became unhealthy"));
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("heartbeat"));
  EXPECT_EQ(error["type"], "service_unavailable");
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText("hb", 2));
  EXPECT_FALSE(Healthy());

  // No new requests while it is out; the process itself still answers Health.
  EXPECT_EQ(http_->Post("/v1/completions", Body("x", 2, false)).status, 503);
  EXPECT_EQ(worker_->requests().size(), 1u);

  // A heartbeat alone does not restore it: the router asks for a new registration.
  worker_->SetStallAfter(-1);
  absl::StatusOr<bool> reregister = worker_->Heartbeat(router_->grpc_address());
  ASSERT_THAT(reregister, IsOk());
  EXPECT_TRUE(*reregister);
  LOCKSTEP_ASSERT_OK(worker_->Register(router_->grpc_address()));
  worker_->StartHeartbeats(router_->grpc_address(), absl::Milliseconds(50));
  HttpResult ok = http_->Post("/v1/completions", Body("back", 3, false));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json["choices"][0]["text"], FakeWorker::ExpectedText("back", 3));
}

TEST_F(RouterFailoverTest, InstanceDyingMidStreamEndsTheRequestAndReplacementServes) {
  worker_->SetStallAfter(1);
  StartStream("die", 10);
  ASSERT_TRUE(worker_->AwaitStalled(1, absl::Seconds(10)));
  worker_->Shutdown();
  HttpResult& result = StreamResult();
  const json error = StreamError(result.body);
  ASSERT_TRUE(error.is_object()) << result.body;
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("agg0"));
  EXPECT_EQ(testing::SseData(result.body).back(), "[DONE]");

  // Failed health polls take it out of rotation.
  ASSERT_TRUE(PollUntil([&] { return !Healthy(); }));
  HttpResult refused = http_->Post("/v1/completions", Body("x", 2, false));
  EXPECT_EQ(refused.status, 503);
  HttpResult health = http_->Get("/health");
  EXPECT_EQ(health.json["instances"][0]["state"], "unhealthy");
  EXPECT_THAT(health.json["instances"][0]["reason"].get<std::string>(), HasSubstr("health check"));
  EXPECT_TRUE(health.json["instances"][0]["unhealthy_since_ms"].is_number_integer()) << health.body;

  // A replacement process registers under the same name and serves.
  absl::StatusOr<std::unique_ptr<FakeWorker>> replacement =
      testing::StartWorker(*router_, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
  ASSERT_THAT(replacement, IsOk());
  HttpResult ok = http_->Post("/v1/completions", Body("again", 2, false));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ((*replacement)->requests().size(), 1u);
  EXPECT_TRUE(http_->Get("/health").json["instances"][0]["unhealthy_since_ms"].is_null());
}

TEST_F(RouterFailoverTest, NonStreamingRequestOnADeadInstanceGetsAnHttpError) {
  worker_->SetStallAfter(1);
  HttpResult result;
  std::thread client([&] {
    result = HttpClient(router_->http_address()).Post("/v1/completions", Body("ns", 5, false));
  });
  ASSERT_TRUE(worker_->AwaitStalled(1, absl::Seconds(10)));
  worker_->Shutdown();
  client.join();
  EXPECT_EQ(result.status, 503) << result.body;
  EXPECT_THAT(result.json["error"]["message"].get<std::string>(), HasSubstr("agg0"));
}

TEST_F(RouterFailoverTest, NoProgressReportEndsRequestsAtOnce) {
  worker_->SetStallAfter(0);
  StartStream("np", 4);
  ASSERT_TRUE(worker_->AwaitStalled(1, absl::Seconds(10)));
  worker_->SetHealth(v1::HealthResponse::STATE_NOT_PROGRESSING);
  const json error = StreamError(StreamResult().body);
  ASSERT_TRUE(error.is_object());
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("no progress"));
  EXPECT_FALSE(Healthy());
  // A serving report brings it back (it never stopped heartbeating or registering).
  worker_->SetStallAfter(-1);
  worker_->SetHealth(v1::HealthResponse::STATE_SERVING);
  ASSERT_TRUE(PollUntil([&] { return Healthy(); }));
  EXPECT_EQ(http_->Post("/v1/completions", Body("ok", 1, false)).status, 200);
}

TEST_F(RouterFailoverTest, ClientHangingUpCancelsTheWorkerStream) {
  worker_->SetStallAfter(1);
  const std::string first(1, static_cast<char>(FakeWorker::TokenAt({'h', 'u', 'p'}, 0)));
  HttpResult result =
      http_->PostStream("/v1/completions", Body("hup", 10, true),
                        [&](const std::string& data) { return testing::SseText(data) != first; });
  EXPECT_EQ(testing::SseText(result.body), first);
  ASSERT_EQ(worker_->requests().size(), 1u);
  const uint64_t id = worker_->requests()[0].request_id();
  // The router notices on its next keep-alive write, cancels the stream and tells the worker.
  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(10)));
  EXPECT_TRUE(worker_->AwaitCancelRpc(id, absl::Seconds(10)));
  // The request is counted after its flow ends (RequestRunner::Run): wait for both.
  EXPECT_TRUE(PollUntil([&] {
    return router_->flows().size() == 0 && router_->metrics().RequestCount("cancelled") >= 1;
  }));
  EXPECT_EQ(router_->metrics().RequestCount("cancelled"), 1);
  EXPECT_TRUE(Healthy());
}

TEST_F(RouterFailoverTest, GrpcClientCancelCancelsTheWorkerStream) {
  worker_->SetStallAfter(1);
  auto stub = v1::RouterService::NewStub(
      grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
  v1::RouterGenerateRequest request;
  request.set_model(testing::kModel);
  request.set_text("cancel");
  request.mutable_sampling()->set_max_tokens(10);
  grpc::ClientContext call;
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto reader = stub->Generate(&call, request);
  v1::RouterGenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.token_ids_size(), 1);
  call.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(worker_->AwaitStreamsCancelled(1, absl::Seconds(10)));
  EXPECT_TRUE(worker_->AwaitCancelRpc(response.request_id(), absl::Seconds(10)));
}

TEST_F(RouterFailoverTest, RequestTimeoutEndsAStalledRequest) {
  router_.reset();
  worker_.reset();
  config::DeploymentConfig config = testing::TestConfig({{"agg0", InstanceRole::kAggregated}});
  config.router.request_timeout_s = 1;
  Start(config);
  worker_->SetStallAfter(0);
  HttpResult result = http_->Post("/v1/completions", Body("slow", 3, false));
  EXPECT_EQ(result.status, 504) << result.body;
  EXPECT_THAT(result.json["error"]["message"].get<std::string>(),
              HasSubstr("did not finish within 1 s"));
  EXPECT_TRUE(worker_->AwaitCancelRpc(worker_->requests()[0].request_id(), absl::Seconds(10)));
  EXPECT_TRUE(Healthy());
}

}  // namespace
}  // namespace lockstep::router
