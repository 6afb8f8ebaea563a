// Who may call the router (docs/security.md): with a cluster token, Register,
// Heartbeat, ListInstances and the rendezvous service need it, and a call without it or
// with a wrong one is UNAUTHENTICATED and changes nothing; Generate is for clients and
// needs the API key instead, exactly as the HTTP API does. Beyond
// router.max_concurrent_requests, requests are refused at once (429 / RESOURCE_EXHAUSTED).
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/router.grpc.pb.h"
#include "runtime/comm/rendezvous_client.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/prometheus_text.h"
#include "runtime/router/testing/router_harness.h"
#include "runtime/security/cluster_security.h"
#include "runtime/security/grpc_credentials.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kToken[] = "router-cluster-token";

security::ClusterSecurity WithToken(const std::string& token) {
  security::ClusterSecurity security;
  security.cluster_token = token;
  return security;
}

void Deadline(grpc::ClientContext& call) {
  call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

// A router and one registered fake worker, all of one cluster (the test process's
// token), and stubs that present no token, a wrong one, or the right one.
class RouterSecurityTest : public ::testing::Test {
 protected:
  void Start(const std::string& api_key, int64_t max_concurrent_requests = 0,
             const std::string& api_keys_file = "") {
    config::DeploymentConfig config = testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
    config.router.api_key = api_key;
    config.router.api_keys_file = api_keys_file;
    config.router.max_concurrent_requests = max_concurrent_requests;
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    absl::StatusOr<std::unique_ptr<testing::FakeWorker>> worker =
        testing::StartWorker(*router_, "agg0", v1::INSTANCE_ROLE_AGGREGATED);
    ASSERT_THAT(worker, IsOk());
    worker_ = *std::move(worker);
  }

  std::unique_ptr<v1::RouterService::Stub> Stub(const std::string& token) {
    return v1::RouterService::NewStub(
        token.empty() ? grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials())
                      : security::CreateChannel(router_->grpc_address(), WithToken(token)));
  }

  grpc::Status Register(v1::RouterService::Stub& stub, const std::string& instance) {
    v1::RegisterRequest request;
    request.set_instance(instance);
    request.set_role(v1::INSTANCE_ROLE_AGGREGATED);
    request.set_world_size(1);
    request.set_leader_address("127.0.0.1:1");
    request.set_model(testing::kModel);
    v1::RegisterResponse response;
    grpc::ClientContext call;
    Deadline(call);
    return stub.Register(&call, request, &response);
  }

  std::vector<std::string> Instances() {
    v1::ListInstancesResponse response;
    grpc::ClientContext call;
    Deadline(call);
    EXPECT_TRUE(Stub(kToken)->ListInstances(&call, v1::ListInstancesRequest(), &response).ok());
    std::vector<std::string> names;
    for (const v1::InstanceInfo& info : response.instances()) names.push_back(info.name());
    return names;
  }

  // Generate with `authorization` metadata (empty: none); the text, or the error.
  grpc::Status Generate(const std::string& authorization, std::string* text) {
    v1::RouterGenerateRequest request;
    request.set_model(testing::kModel);
    request.set_text("key");
    request.mutable_sampling()->set_max_tokens(3);
    grpc::ClientContext call;
    Deadline(call);
    if (!authorization.empty()) call.AddMetadata("authorization", authorization);
    auto reader = Stub("")->Generate(&call, request);
    v1::RouterGenerateResponse response;
    while (reader->Read(&response)) *text += response.text();
    return reader->Finish();
  }

  // lockstep_router_unauthenticated_calls_total on /metrics.
  double Unauthenticated() {
    absl::StatusOr<testing::ParsedMetrics> metrics =
        testing::ParsePrometheusText(router_->metrics().Render(router_->registry().Snapshot()));
    EXPECT_THAT(metrics, IsOk());
    return metrics.ok() ? metrics->Value("lockstep_router_unauthenticated_calls_total") : -1;
  }

  security::ScopedClusterSecurity cluster_{WithToken(kToken)};
  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<testing::FakeWorker> worker_;
};

TEST_F(RouterSecurityTest, MembershipNeedsTheClusterToken) {
  Start("");
  const double rejected_before = Unauthenticated();
  for (const std::string token : {"", "router-cluster-tokem"}) {
    SCOPED_TRACE("token \"" + token + "\"");
    auto stub = Stub(token);
    EXPECT_EQ(Register(*stub, "intruder").error_code(), grpc::StatusCode::UNAUTHENTICATED);

    v1::HeartbeatRequest beat;
    beat.set_instance("agg0");
    v1::HeartbeatResponse beat_response;
    grpc::ClientContext beat_call;
    Deadline(beat_call);
    EXPECT_EQ(stub->Heartbeat(&beat_call, beat, &beat_response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);

    v1::ListInstancesResponse list;
    grpc::ClientContext list_call;
    Deadline(list_call);
    EXPECT_EQ(stub->ListInstances(&list_call, v1::ListInstancesRequest(), &list).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(list.instances_size(), 0);
  }
  // Nothing changed: the intruder is not an instance. The refusals are on /metrics.
  EXPECT_EQ(Unauthenticated() - rejected_before, 6);
  EXPECT_THAT(Instances(), ::testing::ElementsAre("agg0"));
  grpc::Status registered = Register(*Stub(kToken), "late0");
  EXPECT_NE(registered.error_code(), grpc::StatusCode::UNAUTHENTICATED) << registered.error_message();
}

TEST_F(RouterSecurityTest, RendezvousNeedsTheClusterToken) {
  Start("");
  {
    security::ScopedClusterSecurity stranger(WithToken("not-this-cluster"));
    std::unique_ptr<comm::RendezvousClient> client =
        comm::RendezvousClient::Connect(router_->grpc_address(), "agg0");
    EXPECT_THAT(client->Set("rank0", "10.0.0.1:1"),
                lockstep::testing::StatusIs(absl::StatusCode::kUnauthenticated));
  }
  std::unique_ptr<comm::RendezvousClient> member =
      comm::RendezvousClient::Connect(router_->grpc_address(), "agg0");
  EXPECT_THAT(member->Get("rank0"), lockstep::testing::StatusIs(absl::StatusCode::kNotFound));
  LOCKSTEP_EXPECT_OK(member->Set("rank0", "127.0.0.1:2"));
}

// Every rendezvous method, without the token and with a wrong one: UNAUTHENTICATED, and
// nothing is stored or revealed (a refused Get does not return the value, a refused Wait
// does not return although its key is set). With the right token each one works.
TEST_F(RouterSecurityTest, EveryRendezvousMethodNeedsTheClusterToken) {
  Start("");
  std::unique_ptr<comm::RendezvousClient> member =
      comm::RendezvousClient::Connect(router_->grpc_address(), "agg0");
  LOCKSTEP_ASSERT_OK(member->Set("rank0", "10.0.0.1:1"));
  for (const std::string token : {"", "router-cluster-tokem"}) {
    SCOPED_TRACE("token \"" + token + "\"");
    comm::RendezvousClient outsider(
        token.empty()
            ? grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials())
            : security::CreateChannel(router_->grpc_address(), WithToken(token)),
        "agg0");
    EXPECT_THAT(outsider.Set("rank1", "10.6.6.6:1"),
                lockstep::testing::StatusIs(absl::StatusCode::kUnauthenticated));
    EXPECT_THAT(outsider.Get("rank0"),
                lockstep::testing::StatusIs(absl::StatusCode::kUnauthenticated));
    EXPECT_THAT(outsider.Wait({"rank0"}, absl::Seconds(5)),
                lockstep::testing::StatusIs(absl::StatusCode::kUnauthenticated));
  }
  EXPECT_THAT(member->Get("rank1"), lockstep::testing::StatusIs(absl::StatusCode::kNotFound));
  absl::StatusOr<std::string> value = member->Get("rank0");
  ASSERT_THAT(value, IsOk());
  EXPECT_EQ(*value, "10.0.0.1:1");
  LOCKSTEP_EXPECT_OK(member->Wait({"rank0"}, absl::Seconds(5)));
}

// KV events feed the router's prefix index: without the token or with a wrong one the
// report is refused and the index does not change.
TEST_F(RouterSecurityTest, ReportKvEventsNeedsTheClusterToken) {
  Start("");
  v1::ReportKvEventsRequest request;
  request.set_instance("agg0");
  request.set_incarnation(1);
  request.set_hash_salt(7);
  request.set_tokens_per_block(4);
  v1::KvEventBatch* batch = request.add_batches();
  batch->set_rank(0);
  batch->set_seq(1);
  for (uint64_t key : {11u, 12u, 13u}) batch->add_committed(key);
  auto report = [&](const std::string& token) {
    grpc::ClientContext call;
    Deadline(call);
    v1::ReportKvEventsResponse response;
    return Stub(token)->ReportKvEvents(&call, request, &response);
  };
  for (const std::string token : {"", "router-cluster-tokem"}) {
    SCOPED_TRACE("token \"" + token + "\"");
    EXPECT_EQ(report(token).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(router_->kv_routing().Stats().batches, 0);
  EXPECT_EQ(router_->kv_routing().Stats().keys, 0);
  const grpc::Status accepted = report(kToken);
  EXPECT_TRUE(accepted.ok()) << accepted.error_message();
  EXPECT_EQ(router_->kv_routing().Stats().batches, 1);
  EXPECT_EQ(router_->kv_routing().Stats().keys, 3);
}

TEST_F(RouterSecurityTest, GenerateIsForClientsWithoutTheClusterToken) {
  Start("");
  std::string text;
  grpc::Status status = Generate("", &text);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(text, testing::FakeWorker::ExpectedText("key", 3));
}

TEST_F(RouterSecurityTest, GenerateNeedsTheApiKeyLikeHttp) {
  Start("client-key");
  std::string text;
  for (const std::string authorization : {"", "Bearer client-kez", "client-key"}) {
    SCOPED_TRACE("authorization \"" + authorization + "\"");
    grpc::Status status = Generate(authorization, &text);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(status.error_message(), HasSubstr("API key"));
  }
  EXPECT_EQ(text, "");
  EXPECT_TRUE(worker_->requests().empty());
  grpc::Status status = Generate("Bearer client-key", &text);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(text, testing::FakeWorker::ExpectedText("key", 3));
}

// A list of keys from router.api_keys_file guards HTTP and gRPC alike; router.api_key
// is accepted besides them.
TEST_F(RouterSecurityTest, KeysFromTheKeysFileGuardHttpAndGrpc) {
  const std::string keys = ::testing::TempDir() + "/router_api_keys";
  std::ofstream(keys) << "# one key per line\nteam-a-key\n\n  team-b-key  \n";
  Start("single-key", 0, keys);
  testing::HttpClient http(router_->http_address());
  const std::string body =
      R"({"model":")" + std::string(testing::kModel) + R"(","prompt":"key","max_tokens":3})";
  for (const std::string key : {"team-a-key", "team-b-key", "single-key"}) {
    SCOPED_TRACE(key);
    std::string text;
    grpc::Status status = Generate("Bearer " + key, &text);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(text, testing::FakeWorker::ExpectedText("key", 3));
    testing::HttpResult result =
        http.Post("/v1/completions", body, {{"Authorization", "Bearer " + key}});
    EXPECT_EQ(result.status, 200) << result.body;
  }
  const size_t served = worker_->requests().size();
  for (const std::string key : {"team-c-key", "# one key per line", "team-a-ke", ""}) {
    SCOPED_TRACE(key);
    std::string text;
    EXPECT_EQ(Generate("Bearer " + key, &text).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(http.Post("/v1/completions", body, {{"Authorization", "Bearer " + key}}).status,
              401);
  }
  EXPECT_EQ(worker_->requests().size(), served);  // no refused request reached the worker
}

TEST_F(RouterSecurityTest, AnUnreadableOrEmptyKeysFileStopsTheRouterNamingTheField) {
  config::DeploymentConfig config =
      testing::TestConfig({{"agg0", config::InstanceRole::kAggregated}});
  config.router.api_keys_file = ::testing::TempDir() + "/no_such_keys";
  EXPECT_THAT(testing::StartRouter(config),
              lockstep::testing::StatusIs(absl::StatusCode::kNotFound,
                                          HasSubstr("router.api_keys_file: cannot read secret "
                                                    "file " + config.router.api_keys_file)));
  config.router.api_keys_file = ::testing::TempDir() + "/comments_only_keys";
  std::ofstream(config.router.api_keys_file) << "# no key yet\n";
  EXPECT_THAT(testing::StartRouter(config),
              lockstep::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("router.api_keys_file: secret file")));
}

// 10x the limit in concurrent requests: the limit's worth are admitted and complete,
// every other one is refused at once with 429 and Retry-After (gRPC:
// RESOURCE_EXHAUSTED), and the places come back when the admitted requests end.
TEST_F(RouterSecurityTest, RequestsBeyondTheLimitAreRefusedAtOnce) {
  constexpr int kLimit = 4;
  constexpr int kMaxTokens = 8;
  Start("", kLimit);
  worker_->SetHold(true);  // admitted streams hold their place until the hold is lifted
  std::vector<std::thread> admitted;
  std::atomic<int> admitted_ok{0};
  for (int i = 0; i < kLimit; ++i) {
    admitted.emplace_back([this, &admitted_ok] {
      v1::RouterGenerateRequest request;
      request.set_model(testing::kModel);
      request.set_text("held");
      request.mutable_sampling()->set_max_tokens(kMaxTokens);
      grpc::ClientContext call;
      call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      auto reader = Stub("")->Generate(&call, request);
      v1::RouterGenerateResponse response;
      std::string text;
      while (reader->Read(&response)) text += response.text();
      const grpc::Status status = reader->Finish();
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (status.ok() && text == testing::FakeWorker::ExpectedText("held", kMaxTokens)) {
        admitted_ok.fetch_add(1);
      }
    });
  }
  ASSERT_TRUE(worker_->AwaitHeld(kLimit, absl::Seconds(10)));

  std::atomic<int> refused{0};
  std::vector<std::thread> excess;
  for (int i = 0; i < 9 * kLimit; ++i) {
    excess.emplace_back([this, &refused] {
      httplib::Client client("http://" + router_->http_address());
      client.set_read_timeout(10, 0);
      const std::string body =
          R"({"model":")" + std::string(testing::kModel) + R"(","prompt":"x","max_tokens":2})";
      httplib::Result result = client.Post("/v1/completions", body, "application/json");
      if (result && result->status == 429 && result->get_header_value("Retry-After") == "1") {
        refused.fetch_add(1);
      }
    });
  }
  for (std::thread& t : excess) t.join();
  EXPECT_EQ(refused.load(), 9 * kLimit);
  std::string text;
  EXPECT_EQ(Generate("", &text).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(worker_->requests().size(), static_cast<size_t>(kLimit));  // none reached it
  EXPECT_EQ(router_->metrics().RefusalCount("max_concurrent_requests"), 9 * kLimit + 1);
  EXPECT_EQ(router_->metrics().RequestCount("refused"), 9 * kLimit + 1);

  // Released, the admitted requests complete with their whole text.
  worker_->SetHold(false);
  for (std::thread& t : admitted) t.join();
  EXPECT_EQ(admitted_ok.load(), kLimit);
  EXPECT_EQ(router_->metrics().RequestCount("ok"), kLimit);
  // Their places came back: a new request is admitted and completes.
  std::string again;
  const grpc::Status status = Generate("", &again);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(again, testing::FakeWorker::ExpectedText("key", 3));
}

}  // namespace
}  // namespace lockstep::router
