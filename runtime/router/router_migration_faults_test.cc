// Request migration through the router, against fake workers, for the ways an attempt
// can fail besides a dying aggregated or generation instance: a failed context leg
// (worker error or broken stream) goes on on the other context instance; an instance
// whose heartbeats stop is migrated away from as unhealthy; a generation worker that
// cannot pull the KV from a dead context instance gets a fresh context leg elsewhere
// and keeps its own place; the request's deadline covers every attempt; and a
// migration refused by the queue limit still names the attempts before it.
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/router_daemon.h"
#include "runtime/router/testing/fake_worker.h"
#include "runtime/router/testing/migration_fixture.h"
#include "runtime/router/testing/prometheus_text.h"
#include "runtime/router/testing/router_harness.h"

namespace lockstep::router {
namespace {

using config::InstanceRole;
using ::testing::AllOf;
using testing::CompletionBody;
using ::testing::ElementsAreArray;
using testing::FakeWorker;
using ::testing::HasSubstr;
using testing::HttpResult;
using testing::Ids;
using ::testing::Not;

using RouterMigrationFaultsTest = testing::MigrationFixture;

// The client's stream carries the whole text the fake generates for `prompt`, once,
// without an error.
void ExpectComplete(const HttpResult& result, const std::string& prompt, int max_tokens) {
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText(prompt, max_tokens))
      << result.body;
  EXPECT_THAT(result.body, Not(HasSubstr("error")));
  ASSERT_FALSE(testing::SseData(result.body).empty());
  EXPECT_EQ(testing::SseData(result.body).back(), "[DONE]");
}

// ctx0, ctx1, gen0: the context leg fails on the instance that took it (`fail` makes it
// fail while the leg is held there); the request goes on with a context leg on the other
// one, then gen0, and the client gets the whole text.
class ContextLegFailureTest : public testing::MigrationFixture {
 protected:
  void Run(void (*fail)(FakeWorker&)) {
    Start({{"ctx0", InstanceRole::kContext},
           {"ctx1", InstanceRole::kContext},
           {"gen0", InstanceRole::kGeneration}});
    Worker("ctx0").SetHold(true);
    Worker("ctx1").SetHold(true);
    StartStream(CompletionBody("prefill", 8, true));
    FakeWorker* first = Busy({"ctx0", "ctx1"});
    ASSERT_NE(first, nullptr);
    ASSERT_TRUE(first->AwaitHeld(1, absl::Seconds(10)));
    FakeWorker& second = Other(first, "ctx0", "ctx1");
    second.SetHold(false);
    fail(*first);

    ExpectComplete(StreamResult(), "prefill", 8);
    // Nothing was delivered before the failure: the retry is the original request under
    // a fresh id, and gen0 decodes from the second context leg's handle.
    ASSERT_EQ(first->requests().size(), 1u);
    ASSERT_EQ(second.requests().size(), 1u);
    const v1::GenerateRequest retry = second.requests()[0];
    EXPECT_THAT(retry.prompt_token_ids(), ElementsAreArray(Ids("prefill")));
    EXPECT_EQ(retry.sampling().num_generated_in_prompt(), 0);
    EXPECT_NE(retry.request_id(), first->requests()[0].request_id());
    const std::vector<v1::GenerateRequest> gen = Worker("gen0").requests();
    ASSERT_EQ(gen.size(), 1u);
    EXPECT_EQ(gen[0].context().handle().instance(), second.name());
    EXPECT_EQ(gen[0].context().handle().context_request_id(), retry.request_id());
    EXPECT_EQ(Migrations(), 1);
  }
};

TEST_F(ContextLegFailureTest, AContextLegFailingWithARetryableErrorMovesToTheOtherContextInstance) {
  Run([](FakeWorker& ctx) {
    ctx.SetFailure(14, "a rank of this instance stopped");  // UNAVAILABLE: retryable
    ctx.SetHold(false);
  });
  EXPECT_EQ(router_->metrics().MigrationCount("worker_error"), 1);
}

TEST_F(ContextLegFailureTest, AContextLegWhoseStreamBreaksMovesToTheOtherContextInstance) {
  // The leader dies mid-prefill: the stream breaks (or, if the health monitor is
  // quicker, the leg is ended as unhealthy); either way the request moves.
  Run([](FakeWorker& ctx) { ctx.Shutdown(); });
}

TEST_F(RouterMigrationFaultsTest, AnInstanceWhoseHeartbeatsStopIsLeftAsUnhealthy) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}});
  auto [first, other] = StallOneOfTwo(CompletionBody("beat", 10, true));
  ASSERT_NE(first, nullptr);
  FakeWorker& second = *other;
  // It still answers health polls, but misses its heartbeats (timeout 1 s): the health
  // monitor marks it unhealthy and ends the leg running there.
  first->StopHeartbeats();

  ExpectComplete(StreamResult(), "beat", 10);
  EXPECT_TRUE(first->AwaitStreamsCancelled(1, absl::Seconds(10)));
  ASSERT_EQ(second.requests().size(), 1u);
  EXPECT_EQ(second.requests()[0].sampling().num_generated_in_prompt(), 3);
  const HttpResult scrape = http_->Get("/metrics");
  const absl::StatusOr<testing::ParsedMetrics> metrics = testing::ParsePrometheusText(scrape.body);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->Value("lockstep_router_migrations_total", {{"reason", "instance_unhealthy"}}),
            1);
  EXPECT_EQ(metrics->Find("lockstep_router_migrations_total").size(), 1u) << scrape.body;
  EXPECT_EQ(metrics->Value("lockstep_router_migrated_requests_completed_total"), 1);
}

// ctx0, ctx1, gen0: gen0 pulls the KV from the context instance that handed off, which
// died in between; gen0 reports the failed pull with DEADLINE_EXCEEDED (a pull that
// missed transfer.deadline_ms). The context instance is blamed, not gen0: a fresh
// context leg on the other context instance, then gen0 again.
TEST_F(RouterMigrationFaultsTest, AFailedPullFromADeadContextInstanceRetriesTheContextLeg) {
  Start({{"ctx0", InstanceRole::kContext},
         {"ctx1", InstanceRole::kContext},
         {"gen0", InstanceRole::kGeneration}});
  FakeWorker& gen = Worker("gen0");
  gen.SetKvPull(/*DEADLINE_EXCEEDED*/ 4);
  gen.SetHold(true);
  StartStream(CompletionBody("pull", 8, true));
  ASSERT_TRUE(gen.AwaitHeld(1, absl::Seconds(10)));
  FakeWorker* dead = Busy({"ctx0", "ctx1"});
  ASSERT_NE(dead, nullptr);
  FakeWorker& other = Other(dead, "ctx0", "ctx1");
  dead->Shutdown();
  gen.SetHold(false);

  ExpectComplete(StreamResult(), "pull", 8);
  EXPECT_EQ(dead->requests().size(), 1u);
  // The first token came with the handoff: the fresh context leg continues after it.
  ASSERT_EQ(other.requests().size(), 1u);
  EXPECT_EQ(other.requests()[0].sampling().num_generated_in_prompt(), 1);
  const std::vector<v1::GenerateRequest> legs = gen.requests();
  ASSERT_EQ(legs.size(), 2u);
  EXPECT_EQ(legs[0].context().handle().instance(), dead->name());
  EXPECT_EQ(legs[1].context().handle().instance(), other.name());
  EXPECT_EQ(router_->metrics().MigrationCount("kv_pull_failed"), 1);
  EXPECT_EQ(Migrations(), 1);
}

// The only context instance is healthy and a pull from it fails once: the retry takes
// the same context instance and the same generation instance.
TEST_F(RouterMigrationFaultsTest, AFailedPullRetriesOnTheOnlyContextInstanceWhileItIsHealthy) {
  Start({{"ctx0", InstanceRole::kContext}, {"gen0", InstanceRole::kGeneration}});
  Worker("gen0").SetKvPull(/*UNAVAILABLE*/ 14, /*fail_next=*/1);
  const HttpResult result = http_->Post("/v1/completions", CompletionBody("again", 6, false));
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json["choices"][0]["text"], FakeWorker::ExpectedText("again", 6));
  EXPECT_EQ(Worker("ctx0").requests().size(), 2u);
  EXPECT_EQ(Worker("gen0").requests().size(), 2u);
  EXPECT_EQ(router_->metrics().MigrationCount("kv_pull_failed"), 1);
}

// The deadline (20 s) is the request's, not the attempt's: with 19 s of it spent on the
// first attempt, the migrated attempt has the last second, then the request ends with
// the timeout error naming both attempts. (A fresh deadline would leave the stalled
// second attempt running for 20 s more.)
TEST_F(RouterMigrationFaultsTest, TheDeadlineCoversEveryAttempt) {
  // Heartbeats expire by the router's clock: far enough not to in this test.
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}},
        {.request_timeout_s = 20, .heartbeat_timeout_ms = 600'000, .fake_clock = true});
  for (auto& w : workers_) w->SetStallAfter(2);
  StartStream(CompletionBody("late", 10, true));
  FakeWorker* first = Busy({"agg0", "agg1"});
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->AwaitStalled(1, absl::Seconds(10)));
  FakeWorker& second = Other(first, "agg0", "agg1");
  fake_clock_.Advance(absl::Seconds(19));
  const absl::Time failed = absl::Now();
  first->Shutdown();

  const HttpResult& result = StreamResult();
  EXPECT_LT(absl::Now() - failed, absl::Seconds(8)) << "the second attempt got a fresh deadline";
  ASSERT_EQ(second.requests().size(), 1u) << "the request did not migrate";
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText("late", 4));
  EXPECT_THAT(result.body, AllOf(HasSubstr("did not finish within 20 s"),
                                 HasSubstr("migrated 1 time; 2 attempts [" + first->name() + "; " +
                                           second.name() + "]")));
  EXPECT_EQ(Migrations(), 1);
}

// Past the deadline, no attempt starts: the failure ends the request at once.
TEST_F(RouterMigrationFaultsTest, NoAttemptStartsAfterTheDeadline) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}},
        {.request_timeout_s = 20, .heartbeat_timeout_ms = 600'000, .fake_clock = true});
  for (auto& w : workers_) w->SetStallAfter(2);
  StartStream(CompletionBody("gone", 10, true));
  FakeWorker* first = Busy({"agg0", "agg1"});
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->AwaitStalled(1, absl::Seconds(10)));
  fake_clock_.Advance(absl::Seconds(21));
  first->Shutdown();

  const HttpResult& result = StreamResult();
  EXPECT_THAT(result.body, HasSubstr("did not finish within 20 s"));
  EXPECT_TRUE(Other(first, "agg0", "agg1").requests().empty());
  EXPECT_EQ(Migrations(), 0);
}

// agg0 and agg1 with router.max_queued_requests = 1: the request on one instance loses
// it while the other holds a request of its own; the migration is refused by the queue
// limit, and the refusal names the attempt before it.
TEST_F(RouterMigrationFaultsTest, AMigrationRefusedByTheQueueLimitNamesTheEarlierAttempts) {
  Start({{"agg0", InstanceRole::kAggregated}, {"agg1", InstanceRole::kAggregated}},
        {.max_queued_requests = 1});
  for (auto& w : workers_) w->SetStallAfter(2);
  const int migrating = StartStream(CompletionBody("queued", 10, true));
  FakeWorker* first = Busy({"agg0", "agg1"});
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->AwaitStalled(1, absl::Seconds(10)));
  FakeWorker& second = Other(first, "agg0", "agg1");
  StartStream(CompletionBody("holder", 10, true));  // takes the other's only place
  ASSERT_TRUE(second.AwaitStalled(1, absl::Seconds(10)));
  first->Shutdown();

  const HttpResult& result = StreamResult(migrating);
  EXPECT_EQ(testing::SseText(result.body), FakeWorker::ExpectedText("queued", 2));
  EXPECT_THAT(result.body, AllOf(HasSubstr("router.max_queued_requests"),
                                 HasSubstr("migrated 1 time; 1 attempt [" + first->name() + "]")));
  EXPECT_EQ(second.requests().size(), 1u);
}

}  // namespace
}  // namespace lockstep::router
