// Request migration through the router, over real HTTP and gRPC against fake workers:
// a request whose instance dies mid-stream goes on elsewhere as a continuation of the
// tokens it delivered (aggregated, and two-leg with a fresh context leg), the client
// seeing one stream with the text it would have got; the migration limit and a missing
// second instance end a request with an error that names its attempts; a client
// cancel or a validation error never migrates.
#include <string>
#include <vector>

#include "common/testing/poll_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/migration_fixture.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::lockstep::testing::PollUntil;
using ::testing::AllOf;
using testing::CompletionBody;
using ::testing::ElementsAreArray;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::HttpResult;
using testing::Ids;

using RouterMigrationTest = testing::MigrationFixture;

TEST_F(RouterMigrationTest, AStreamWhoseInstanceDiesGoesOnElsewhereAsAContinuation) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}});
  auto [first, other] = StallOneOfTwo(CompletionBody("abc", 10, true));
  ASSERT_NE(first, nullptr);
  FakeWorker& second = *other;
  first->Shutdown();

  const HttpResult& result = StreamResult();
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText("abc", 10)) << result.body;
  EXPECT_THAT(result.body, ::testing::Not(HasSubstr("error")));
  EXPECT_EQ(testing::SseData(result.body).back(), "[DONE]");

  // The continuation: the prompt and the 3 delivered tokens, the 7 still to generate.
  ASSERT_EQ(second.requests().size(), 1u);
  const v1::GenerateRequest next = second.requests()[0];
  std::vector<int32_t> prompt = Ids("abc");
  const std::string delivered = FakeWorker::ExpectedText("abc", 3);
  for (char c : delivered) prompt.push_back(static_cast<uint8_t>(c));
  EXPECT_THAT(next.prompt_token_ids(), ElementsAreArray(prompt));
  EXPECT_EQ(next.sampling().num_generated_in_prompt(), 3);
  EXPECT_EQ(next.sampling().max_tokens(), 7);
  EXPECT_EQ(next.sampling().seed(), first->requests()[0].sampling().seed());
  EXPECT_NE(next.request_id(), first->requests()[0].request_id());
  EXPECT_EQ(router_->metrics().MigrationCount("stream_broken"), 1);
}

TEST_F(RouterMigrationTest, ATwoLegRequestRetriesWithAFreshContextLegAndReleasesTheClaim) {
  Start({{"ctx0", InstanceRole::kContext},
         {"gen0", InstanceRole::kGeneration},
         {"gen1", InstanceRole::kGeneration}});
  Worker("gen0").SetStallAfter(2);
  Worker("gen1").SetStallAfter(2);
  StartStream(CompletionBody("xyz", 9, true));
  FakeWorker* first = Busy({"gen0", "gen1"});
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->AwaitStalled(1, absl::Seconds(10)));
  FakeWorker& second = Other(first, "gen0", "gen1");
  second.SetStallAfter(-1);
  first->Shutdown();

  const HttpResult& result = StreamResult();
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText("xyz", 9)) << result.body;
  // Two context legs: the original, then the continuation of its 3 delivered tokens
  // (the context leg's first token and two from the generation leg).
  FakeWorker& ctx = Worker("ctx0");
  const std::vector<v1::GenerateRequest> legs = ctx.requests();
  ASSERT_EQ(legs.size(), 2u);
  EXPECT_EQ(legs[1].sampling().num_generated_in_prompt(), 3);
  EXPECT_EQ(legs[1].prompt_token_ids_size(), 6);
  EXPECT_EQ(legs[1].sampling().max_tokens(), 6);
  ASSERT_EQ(second.requests().size(), 1u);
  EXPECT_EQ(second.requests()[0].context().handle().context_request_id(), legs[1].request_id());
  // The failed attempt's KV claim on the context instance is released.
  EXPECT_TRUE(ctx.AwaitCancelRpc(legs[0].request_id(), absl::Seconds(10)));
  EXPECT_EQ(Migrations(), 1);
}

TEST_F(RouterMigrationTest, TheMigrationLimitEndsTheRequestWithAnErrorNamingTheAttempts) {
  Start({{"agg0", InstanceRole::kAggregated},
         {"agg1", InstanceRole::kAggregated},
         {"agg2", InstanceRole::kAggregated}});
  // UNAVAILABLE from the worker blames the instance: each attempt migrates.
  for (auto& w : workers_) w->SetFailure(14, "a rank of this instance stopped");
  const HttpResult result = http_->Post("/v1/completions", CompletionBody("lim", 4, false));
  EXPECT_EQ(result.status, 503) << result.body;
  const std::string message = result.json["error"]["message"];
  // The limit counts migrations: 2 allow 3 attempts, each named.
  EXPECT_THAT(message,
              AllOf(HasSubstr("a rank of this instance stopped"), HasSubstr("after 3 attempts ["),
                    HasSubstr("agg0"), HasSubstr("agg1"), HasSubstr("agg2"),
                    HasSubstr("router.migration_limit = 2 migrations")));
  for (auto& w : workers_) EXPECT_EQ(w->requests().size(), 1u) << w->name();
  EXPECT_EQ(router_->metrics().MigrationCount("worker_error"), 2);
}

TEST_F(RouterMigrationTest, WithoutAnotherHealthyInstanceTheErrorSaysSo) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}});
  for (auto& w : workers_) w->SetFailure(14, "a rank of this instance stopped");
  const HttpResult result = http_->Post("/v1/completions", CompletionBody("none", 4, false));
  EXPECT_EQ(result.status, 503) << result.body;
  EXPECT_THAT(result.json["error"]["message"].get<std::string>(),
              AllOf(HasSubstr("no other healthy aggregated instance to migrate to"),
                    HasSubstr("after 2 attempts [")));
}

TEST_F(RouterMigrationTest, AZeroLimitNeverMigrates) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}},
        {.migration_limit = 0});
  for (auto& w : workers_) w->SetFailure(14, "a rank of this instance stopped");
  const HttpResult result = http_->Post("/v1/completions", CompletionBody("zero", 4, false));
  EXPECT_EQ(result.status, 503) << result.body;
  EXPECT_THAT(result.json["error"]["message"].get<std::string>(),
              HasSubstr("router.migration_limit = 0"));
  EXPECT_EQ(Worker("agg0").requests().size() + Worker("agg1").requests().size(), 1u);
}

TEST_F(RouterMigrationTest, AClientCancelIsNeverMigrated) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}});
  for (auto& w : workers_) w->SetStallAfter(1);
  const std::string first_token(1, static_cast<char>(FakeWorker::TokenAt(Ids("bye"), 0)));
  const HttpResult result = http_->PostStream(
      "/v1/completions", CompletionBody("bye", 10, true),
      [&](const std::string& data) { return testing::SseText(data) != first_token; });
  EXPECT_EQ(testing::SseText(result.body), first_token);
  FakeWorker* served = Busy({"agg0", "agg1"});
  ASSERT_NE(served, nullptr);
  EXPECT_TRUE(served->AwaitCancelRpc(served->requests()[0].request_id(), absl::Seconds(10)));
  // The request is counted after its flow ends (RequestRunner::Run): wait for both.
  EXPECT_TRUE(PollUntil([&] {
    return router_->flows().size() == 0 && router_->metrics().RequestCount("cancelled") >= 1;
  }));
  EXPECT_EQ(Worker("agg0").requests().size() + Worker("agg1").requests().size(), 1u);
  EXPECT_EQ(Migrations(), 0);
  EXPECT_EQ(router_->metrics().RequestCount("cancelled"), 1);
}

TEST_F(RouterMigrationTest, AValidationErrorIsNeverMigrated) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}});
  for (auto& w : workers_) w->SetFailure(3, "token 9999 is not in the vocabulary");
  const HttpResult result = http_->Post("/v1/completions", CompletionBody("bad", 4, false));
  EXPECT_EQ(result.status, 400) << result.body;
  EXPECT_THAT(result.json["error"]["message"].get<std::string>(),
              AllOf(HasSubstr("not in the vocabulary"), ::testing::Not(HasSubstr("attempts"))));
  EXPECT_EQ(Worker("agg0").requests().size() + Worker("agg1").requests().size(), 1u);
  EXPECT_EQ(Migrations(), 0);
}

}  // namespace
}  // namespace lockstep::router
