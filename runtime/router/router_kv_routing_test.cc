// kv_aware routing through the router over real HTTP and gRPC against fake workers:
// KV events in (RouterService.ReportKvEvents), the context leg routed to the instance
// holding the prompt's prefix with its rank as the hint, the generation leg by load,
// and the routing metrics on /metrics.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kvcache/prefix_hash.h"
#include "nlohmann/json.hpp"
#include "proto/router.grpc.pb.h"
#include "runtime/config/role_wire.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/prometheus_text.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::HttpClient;
using testing::HttpResult;
using ::testing::IsEmpty;

constexpr uint64_t kSalt = 7;
constexpr int kTpb = 4;

std::string Body(const std::string& prompt, int max_tokens) {
  return nlohmann::json{{"model", testing::kModel},
                        {"prompt", prompt},
                        {"max_tokens", max_tokens},
                        {"temperature", 0}}
      .dump();
}

class KvRoutingDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::pair<std::string, InstanceRole>> instances = {
        {"ctx0", InstanceRole::kContext},
        {"ctx1", InstanceRole::kContext},
        {"gen0", InstanceRole::kGeneration},
        {"gen1", InstanceRole::kGeneration}};
    config::DeploymentConfig config =
        testing::TestConfig(instances, config::RoutingPolicy::kKvAware);
    config.instances[1].world_size = 2;  // ctx1: its rank 1 holds the prefix
    absl::StatusOr<std::unique_ptr<RouterDaemon>> router = testing::StartRouter(config);
    ASSERT_THAT(router, IsOk());
    router_ = *std::move(router);
    http_ = std::make_unique<HttpClient>(router_->http_address());
    for (const config::InstanceConfig& instance : config.instances) {
      absl::StatusOr<std::unique_ptr<FakeWorker>> worker =
          testing::StartWorker(*router_, instance.name, config::RoleToWire(instance.role),
                               static_cast<int32_t>(instance.world_size));
      ASSERT_THAT(worker, IsOk());
      workers_[instance.name] = *std::move(worker);
    }
    stub_ = v1::RouterService::NewStub(
        grpc::CreateChannel(router_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  // ReportKvEvents as `instance`'s leader: one batch of `rank` committing the first
  // `blocks` keys of `tokens`' chain.
  absl::StatusOr<v1::ReportKvEventsResponse> Report(const std::string& instance, int32_t rank,
                                                    uint64_t seq,
                                                    const std::vector<int32_t>& tokens,
                                                    size_t blocks) {
    v1::ReportKvEventsRequest request;
    request.set_instance(instance);
    request.set_incarnation(1);
    request.set_hash_salt(kSalt);
    request.set_tokens_per_block(kTpb);
    v1::KvEventBatch* batch = request.add_batches();
    batch->set_rank(rank);
    batch->set_seq(seq);
    const std::vector<uint64_t> chain = kv::PrefixHashChain(kSalt, kTpb, tokens);
    for (size_t i = 0; i < blocks && i < chain.size(); ++i) batch->add_committed(chain[i]);
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportKvEventsResponse response;
    const grpc::Status status = stub_->ReportKvEvents(&call, request, &response);
    if (!status.ok()) return absl::UnknownError(status.error_message());
    return response;
  }

  std::unique_ptr<RouterDaemon> router_;
  std::unique_ptr<HttpClient> http_;
  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<v1::RouterService::Stub> stub_;
};

TEST_F(KvRoutingDaemonTest, ContextLegsFollowThePrefixGenerationLegsTheLoad) {
  const std::string prompt = "a system prompt shared by a conversation";
  // A first request learns the prompt's tokens (the router's tokenizer).
  ASSERT_EQ(http_->Post("/v1/completions", Body(prompt, 3)).status, 200);
  std::vector<int32_t> tokens;
  for (const auto& [name, worker] : workers_) {
    for (const v1::GenerateRequest& r : worker->requests()) {
      tokens.assign(r.prompt_token_ids().begin(), r.prompt_token_ids().end());
    }
  }
  ASSERT_GE(tokens.size(), prompt.size());
  absl::StatusOr<v1::ReportKvEventsResponse> answer = Report("ctx1", 1, 1, tokens, 5);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), IsEmpty());

  const size_t ctx1_before = workers_["ctx1"]->requests().size();
  for (int i = 0; i < 4; ++i) {
    HttpResult result = http_->Post("/v1/completions", Body(prompt, 3));
    ASSERT_EQ(result.status, 200) << result.body;
    EXPECT_EQ(result.json["choices"][0]["text"], FakeWorker::ExpectedText(prompt, 3));
  }
  const std::vector<v1::GenerateRequest> ctx1 = workers_["ctx1"]->requests();
  ASSERT_EQ(ctx1.size(), ctx1_before + 4);
  for (size_t i = ctx1_before; i < ctx1.size(); ++i) {
    ASSERT_TRUE(ctx1[i].has_rank_hint());
    EXPECT_EQ(ctx1[i].rank_hint(), 1);
  }
  // Generation legs by load: both instances, never a hint.
  for (const char* gen : {"gen0", "gen1"}) {
    EXPECT_GE(workers_[gen]->requests().size(), 2u) << gen;
    for (const v1::GenerateRequest& r : workers_[gen]->requests()) {
      EXPECT_FALSE(r.has_rank_hint()) << gen;
    }
  }
  RouterMetrics& m = router_->metrics();
  EXPECT_EQ(m.RoutingDecisions("prefix"), 4);
  EXPECT_EQ(m.RoutingDecisions("load"), 1 + 5);  // the first context leg; 5 generation legs
  EXPECT_EQ(m.RankHints("overridden"), 4);       // the fakes answer as rank 0
  EXPECT_EQ(m.PrefixCachedTokens(), 0);          // rank 0 holds nothing

  // A gap: the router asks for a snapshot of that rank and forgets what it held.
  answer = Report("ctx1", 1, 3, tokens, 5);
  ASSERT_THAT(answer, IsOk());
  EXPECT_THAT(answer->snapshot_ranks(), ElementsAre(1));

  HttpResult metrics = http_->Get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  absl::StatusOr<testing::ParsedMetrics> parsed = testing::ParsePrometheusText(metrics.body);
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->Value("lockstep_router_kv_index_keys"), 0);
  EXPECT_EQ(parsed->Value("lockstep_router_kv_resyncs_total"), 1);
  EXPECT_EQ(parsed->Value("lockstep_router_kv_event_batches_total"), 2);
  EXPECT_EQ(parsed->Value("lockstep_router_kv_index_source_in_sync",
                          {{"instance", "ctx1"}, {"rank", "1"}}),
            0);
  EXPECT_EQ(parsed->Value("lockstep_router_routing_decisions_total", {{"reason", "prefix"}}), 4);
  EXPECT_EQ(parsed->Value("lockstep_router_rank_hints_total", {{"outcome", "overridden"}}), 4);
}

// A leader's report names ranks of its own instance only: ranks outside its world size,
// another world size or an instance the router does not know are refused, naming both
// values, and the index does not change (a rank indexes per-rank state).
TEST_F(KvRoutingDaemonTest, ReportsAreCheckedAgainstTheInstancesWorldSize) {
  auto report = [&](const std::string& instance, int32_t world_size, int32_t rank) {
    v1::ReportKvEventsRequest request;
    request.set_instance(instance);
    request.set_incarnation(1);
    request.set_hash_salt(kSalt);
    request.set_tokens_per_block(kTpb);
    request.set_world_size(world_size);
    v1::KvEventBatch* batch = request.add_batches();
    batch->set_rank(rank);
    batch->set_seq(1);
    batch->add_committed(42);
    grpc::ClientContext call;
    call.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ReportKvEventsResponse response;
    return stub_->ReportKvEvents(&call, request, &response);
  };
  const grpc::Status far_rank = report("ctx1", 2, 2147483647);
  EXPECT_EQ(far_rank.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(far_rank.error_message(),
              HasSubstr("instance ctx1 is registered with world_size 2, the report names rank "
                        "2147483647"));
  EXPECT_EQ(report("ctx1", 2, -1).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const grpc::Status wrong_size = report("ctx1", 2147483647, 0);
  EXPECT_EQ(wrong_size.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wrong_size.error_message(),
              HasSubstr("instance ctx1 is registered with world_size 2, the report says "
                        "world_size 2147483647"));
  const grpc::Status stranger = report("nobody", 1, 0);
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(stranger.error_message(), HasSubstr("'nobody' is neither configured nor registered"));
  EXPECT_EQ(router_->kv_routing().Stats().batches, 0);
  EXPECT_EQ(router_->kv_routing().Stats().keys, 0);
  // Its own ranks are taken.
  const grpc::Status own = report("ctx1", 2, 1);
  EXPECT_TRUE(own.ok()) << own.error_message();
  EXPECT_EQ(router_->kv_routing().Stats().keys, 1);
}

}  // namespace
}  // namespace lockstep::router
