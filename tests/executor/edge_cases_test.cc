// The executor edge-case checklist (docs/executor-edge-cases.md maps every item of the
// anchor's list to a test here, elsewhere, or a reason it does not apply).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/faulty_communicator.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

ClusterOptions Base(int ranks, exec::Role role = exec::Role::kAggregated) {
  ClusterOptions o;
  o.ranks = ranks;
  o.role = role;
  o.scheduler.max_batch_size = 4;
  o.scheduler.max_num_active_requests = 4;
  o.scheduler.max_num_tokens = 128;
  o.scheduler.prefix_reuse = false;
  o.tokens_per_block = 4;
  o.num_blocks = 64;
  return o;
}

ClusterOptions WithDraft(ClusterOptions o, kv::DraftMode mode, int k = 3) {
  o.scheduler.num_draft_tokens = k;
  o.draft_mode = mode;
  return o;
}

// Steps until every submitted request finished, checking the audit after every step.
void RunToEnd(ScriptedCluster& c, int64_t expected, int max_steps = 2000) {
  for (int i = 0; i < max_steps && !c.AllFinished(expected); ++i) {
    ASSERT_TRUE(c.StepAll().ok()) << "step " << c.steps();
    const std::vector<std::string> audit = c.AuditAll();
    ASSERT_THAT(audit, IsEmpty()) << "step " << c.steps();
  }
  ASSERT_TRUE(c.AllFinished(expected)) << "not finished after " << max_steps << " steps";
}

void ExpectBaseline(ScriptedCluster& c) {
  for (int r = 0; r < c.ranks(); ++r) {
    const kv::ManagerStats s = c.rank(r).kv().Stats();
    EXPECT_EQ(s.target.used_blocks, 0) << "rank " << r;
    EXPECT_EQ(s.target.num_caches, 0) << "rank " << r;
    if (s.draft) {
      EXPECT_EQ(s.draft->used_blocks, 0) << "rank " << r;
    }
  }
}

// Checklist: a rank with only GENERATION_TO_COMPLETE requests while a peer has work
// must pad (its request is in flight, not schedulable).
TEST(EdgeCasesTest, RankWithOnlyToCompleteRequestsPads) {
  ScriptedCluster c(Base(2));
  auto a = c.MakeRequest(1, 4, 1, 0);   // rank 0: one token, to-complete after prefill
  auto b = c.MakeRequest(2, 4, 30, 1);  // rank 1: long
  c.Submit(a);
  c.Submit(b);
  RunToEnd(c, 2);
  EXPECT_EQ(c.rank(0).counters().vetoed_steps, 0);
  EXPECT_GT(c.rank(0).counters().padded_steps, 0);
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
  EXPECT_EQ(c.stream(b.id).tokens, c.ExpectedTokens(b));
}

// Checklist: ranks that only await KV transfers are not schedulable; they pad only when
// some rank has forward work, and nobody pads (or vetoes) when every rank only waits.
TEST(EdgeCasesTest, RanksOnlyAwaitingTransfersDoNotPad) {
  ClusterOptions o = Base(2, exec::Role::kGeneration);
  o.transfer_latency = absl::Milliseconds(20);
  ScriptedCluster c(o);
  c.Submit(c.MakeRequest(1, 4, 4, 0));
  c.Submit(c.MakeRequest(2, 4, 4, 1));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(c.StepAll().ok());
  // Both requests are receiving: no pads, no vetoes, no forwards.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(c.rank(r).counters().dummies_created, 0) << r;
    EXPECT_EQ(c.rank(r).counters().vetoed_steps, 0) << r;
  }
  RunToEnd(c, 2);
  ExpectBaseline(c);
}

// Checklist: the pre-schedule dummy cannot get KV (compat: no reservation) -> no dummy,
// no leak, fleet veto, retry next step; everything still completes.
TEST(EdgeCasesTest, DummyWithoutKvVetoesWithoutLeaking) {
  ClusterOptions o = Base(2);
  o.scheduler.dummy_policy = sched::DummyPolicy::kCompat;
  o.num_blocks = 8;  // 32 tokens per rank
  ScriptedCluster c(o);
  // Rank 0: four one-token requests fill its whole pool during prefill and then wait
  // (to-complete) for their token; nothing is left for a dummy. Rank 1 has work.
  std::vector<exec::NewRequestSpec> specs;
  for (int i = 1; i <= 4; ++i) specs.push_back(c.MakeRequest(i, 8, 1, 0));
  specs.push_back(c.MakeRequest(5, 4, 12, 1));
  for (const auto& s : specs) c.Submit(s);
  RunToEnd(c, 5);
  EXPECT_GT(c.rank(0).counters().dummies_refused, 0);
  EXPECT_GT(c.rank(0).counters().vetoed_steps, 0);
  ExpectBaseline(c);
  for (const auto& s : specs) EXPECT_EQ(c.stream(s.id).tokens, c.ExpectedTokens(s)) << s.id;
}

// Checklist: a rank holding requests but scheduling nothing at max_num_active_requests
// is refused the post-schedule pad under compat (the fleet vetoes) and must not leak;
// under reserved it pads.
TEST(EdgeCasesTest, FullRankCannotPadUnderCompatButCanUnderReserved) {
  for (sched::DummyPolicy policy : {sched::DummyPolicy::kCompat, sched::DummyPolicy::kReserved}) {
    SCOPED_TRACE(sched::DummyPolicyName(policy));
    ClusterOptions o = WithDraft(Base(2, exec::Role::kGeneration), kv::DraftMode::kUnpaired);
    o.scheduler.max_batch_size = 1;
    o.scheduler.max_num_active_requests = 1;
    o.scheduler.dummy_policy = policy;
    o.rank_transfer_latency = {absl::Milliseconds(1), absl::Milliseconds(30)};
    ScriptedCluster c(o);
    c.Submit(c.MakeRequest(1, 8, 20, 0));
    c.Submit(c.MakeRequest(2, 8, 4, 1));  // rank 1: full, receiving for 30 steps
    RunToEnd(c, 2);
    ExpectBaseline(c);
    if (policy == sched::DummyPolicy::kCompat) {
      EXPECT_GT(c.rank(0).counters().vetoed_steps, 0);
      EXPECT_GT(c.rank(1).counters().dummies_refused, 0);
    } else {
      EXPECT_EQ(c.rank(0).counters().vetoed_steps, 0);
    }
  }
}

// Checklist: veto with a pending dummy frees it in a PAIRED draft pool too; repeated
// vetoes on consecutive steps create and roll back a dummy each time.
TEST(EdgeCasesTest, RepeatedVetoesWithPairedDraftPool) {
  ClusterOptions o = WithDraft(Base(3), kv::DraftMode::kPaired);
  for (int step = 2; step < 12; ++step) {
    // Rank 2 reports an empty batch at ten consecutive steps.
    o.faults.push_back(
        comm::FaultRule::Mutate(2, "vote", step, [](absl::Span<int64_t> v) { v[0] = 1; }));
  }
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 6, 20, 0);
  c.Submit(a);
  RunToEnd(c, 1);
  EXPECT_GE(c.rank(0).counters().vetoed_steps, 10);
  EXPECT_GE(c.rank(1).counters().dummies_created, 10);
  ExpectBaseline(c);
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
}

// Checklist: can_queue false with a non-empty local batch defers the previous batch's
// update (the response gather still runs on every rank); with an empty local batch the
// previous batch is processed and cleared.
TEST(EdgeCasesTest, DeferralTable) {
  ClusterOptions o = Base(2);
  o.faults.push_back(
      comm::FaultRule::Mutate(1, "vote", 6, [](absl::Span<int64_t> v) { v[0] = 1; }));
  ScriptedCluster c(o);
  c.Submit(c.MakeRequest(1, 4, 30, 0));
  c.Submit(c.MakeRequest(2, 4, 30, 1));
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(c.StepAll().ok());
  const exec::StepStats s0 = c.rank(0).step_stats().last();
  EXPECT_TRUE(s0.vetoed);
  EXPECT_TRUE(s0.deferred);  // rank 0 had a batch: deferred
  EXPECT_TRUE(c.rank(0).has_batch_in_flight());
  EXPECT_TRUE(c.rank(1).step_stats().last().vetoed);
  RunToEnd(c, 2);
  ExpectBaseline(c);
}

// Checklist: a deferred batch processed after its request was cancelled: the update is
// skipped safely and nothing leaks.
TEST(EdgeCasesTest, CancelWhileUpdateIsDeferred) {
  ClusterOptions o = Base(2);
  o.faults.push_back(
      comm::FaultRule::Mutate(1, "vote", 8, [](absl::Span<int64_t> v) { v[0] = 1; }));
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 4, 50, 0);
  c.Submit(a);
  c.Submit(c.MakeRequest(2, 4, 50, 1));
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(c.StepAll().ok());
  ASSERT_TRUE(c.rank(0).step_stats().last().deferred);
  c.Cancel(a.id);
  RunToEnd(c, 2);
  const Stream s = c.stream(a.id);
  EXPECT_EQ(s.reason, sched::FinishReason::kCancelled);
  EXPECT_THAT(std::string(s.status.message()), HasSubstr("cancelled"));
  EXPECT_GT(c.rank(0).counters().stale_updates, 0);
  ExpectBaseline(c);
}

// Checklist: a transfer error on one rank fails that request (with a message naming the
// context instance), the other ranks keep stepping, everything else completes.
TEST(EdgeCasesTest, TransferFailureFailsOnlyItsRequest) {
  ClusterOptions o = Base(2, exec::Role::kGeneration);
  o.transfer_failure_rate = 0.5;
  ScriptedCluster c(o);
  std::vector<exec::NewRequestSpec> specs;
  for (int i = 1; i <= 12; ++i) specs.push_back(c.MakeRequest(i, 6, 6));
  for (const auto& s : specs) c.Submit(s);
  RunToEnd(c, 12);
  int failed = 0, ok = 0;
  for (const auto& s : specs) {
    const Stream st = c.stream(s.id);
    if (st.reason == sched::FinishReason::kError) {
      ++failed;
      EXPECT_THAT(std::string(st.status.message()), HasSubstr("KV transfer from ctx"));
    } else {
      ++ok;
      EXPECT_EQ(st.tokens, c.ExpectedTokens(s));
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(ok, 0);
  ExpectBaseline(c);
}

// Checklist: a receive past its deadline is cancelled, then its request fails with
// DeadlineExceeded; its blocks are freed.
TEST(EdgeCasesTest, TransferDeadline) {
  ClusterOptions o = Base(1, exec::Role::kGeneration);
  o.transfer_latency = absl::Milliseconds(500);
  o.transfer_deadline = absl::Milliseconds(50);
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 6, 6);
  c.Submit(a);
  RunToEnd(c, 1);
  const Stream s = c.stream(a.id);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.status.message()), HasSubstr("KV transfer from ctx rank 0"));
  ExpectBaseline(c);
}

// Checklist: a context-only request answers (first token, drafts, where its KV waits)
// before it is terminated; its blocks stay claimed until the send ends, then are freed.
TEST(EdgeCasesTest, ContextOnlyRespondsThenHoldsKvUntilSent) {
  ClusterOptions o = WithDraft(Base(2, exec::Role::kContext), kv::DraftMode::kUnpaired, 2);
  o.transfer_latency = absl::Milliseconds(15);
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 10, 8, 1);
  c.Submit(a);
  ASSERT_TRUE(c.StepUntil([&] { return c.AllFinished(0) && c.stream(a.id).context; }, 50));
  const Stream s = c.stream(a.id);
  ASSERT_TRUE(s.context.has_value());
  EXPECT_EQ(s.context->rank, 1);
  EXPECT_EQ(s.context->address, "test-rank-1");
  EXPECT_EQ(s.context->first_token, c.ExpectedTokens(a)[0]);
  EXPECT_EQ(s.context->first_drafts.size(), 2u);
  EXPECT_EQ(c.rank(1).ClaimedIds(), std::vector<RequestId>{a.id});
  EXPECT_GT(c.rank(1).kv().Stats().target.used_blocks, 0);  // still claimed
  ASSERT_TRUE(c.StepUntil([&] { return c.rank(1).ClaimedIds().empty(); }, 50));
  EXPECT_EQ(c.rank(1).counters().transfers_sent, 1);
  ExpectBaseline(c);
}

// Checklist: a new request that fails validation is answered at once with a clear
// error; the instance keeps serving the others.
TEST(EdgeCasesTest, InvalidRequestsAreAnsweredImmediately) {
  ScriptedCluster c(Base(2));
  exec::NewRequestSpec empty = c.MakeRequest(1, 0, 4);
  exec::NewRequestSpec bad_token = c.MakeRequest(2, 4, 4);
  bad_token.prompt[1] = 100000;
  exec::NewRequestSpec too_long = c.MakeRequest(3, 4, 100000);
  exec::NewRequestSpec good = c.MakeRequest(4, 4, 4);
  for (const auto& s : {empty, bad_token, too_long, good}) c.Submit(s);
  RunToEnd(c, 4);
  EXPECT_THAT(std::string(c.stream(empty.id).status.message()), HasSubstr("prompt is empty"));
  EXPECT_THAT(std::string(c.stream(bad_token.id).status.message()),
              HasSubstr("outside the vocabulary"));
  EXPECT_THAT(std::string(c.stream(too_long.id).status.message()), HasSubstr("KV blocks"));
  EXPECT_EQ(c.stream(good.id).tokens, c.ExpectedTokens(good));
  EXPECT_EQ(c.rank(0).counters().rejected, 3);
}

// Checklist: drain finishes every accepted request, refuses new ones with a clear
// status, and all ranks stop together.
TEST(EdgeCasesTest, DrainFinishesAcceptedAndRefusesNew) {
  ScriptedCluster c(Base(2));
  auto a = c.MakeRequest(1, 4, 20);
  auto b = c.MakeRequest(2, 4, 20);
  c.Submit(a);
  c.Submit(b);
  ASSERT_TRUE(c.StepAll().ok());
  c.rank(0).inbox().Drain();
  auto late = c.MakeRequest(3, 4, 4);
  c.Submit(late);
  ASSERT_TRUE(c.StepUntil([&] { return c.rank(0).drained() && c.rank(1).drained(); }, 200));
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
  EXPECT_EQ(c.stream(b.id).tokens, c.ExpectedTokens(b));
  EXPECT_EQ(c.stream(late.id).status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.stream(late.id).status.message()), HasSubstr("draining"));
  ExpectBaseline(c);
}

// Requests waiting at the leader are admitted oldest first: a short prompt is not
// starved by longer ones that keep arriving (assignment balances longest first only
// among the requests that fit this step).
TEST(EdgeCasesTest, QueuedRequestsAreAdmittedOldestFirst) {
  ClusterOptions o = Base(1);
  o.scheduler.max_batch_size = 1;
  o.scheduler.max_num_active_requests = 1;
  ScriptedCluster c(o);
  c.Submit(c.MakeRequest(1, 4, 3));  // occupies the only slot
  ASSERT_TRUE(c.StepAll().ok());
  auto shortest = c.MakeRequest(2, 2, 2);
  c.Submit(shortest);
  int64_t next_id = 3;
  bool short_done_first = false;
  for (int step = 0; step < 200 && !c.stream(shortest.id).finished; ++step) {
    c.Submit(c.MakeRequest(next_id++, 40, 2));  // a longer prompt arrives every step
    ASSERT_TRUE(c.StepAll().ok());
    short_done_first = c.stream(shortest.id).finished && !c.stream(RequestId(3)).finished;
  }
  EXPECT_TRUE(short_done_first) << "the short request waited behind younger long ones";
}

// A drain that outlives its deadline fails what is still running or queued, with a
// clear status, and the instance stops: nothing accepted is left without an answer.
TEST(EdgeCasesTest, DrainDeadlineAnswersEveryAcceptedRequest) {
  ClusterOptions o = Base(1);
  o.scheduler.max_batch_size = 1;
  o.scheduler.max_num_active_requests = 1;
  o.drain_timeout = absl::Milliseconds(5);
  ScriptedCluster c(o);
  for (int i = 1; i <= 3; ++i) c.Submit(c.MakeRequest(i, 4, 200));  // 1 running, 2 queued
  ASSERT_TRUE(c.StepAll().ok());
  c.rank(0).inbox().Drain();
  ASSERT_TRUE(c.StepUntil([&] { return c.rank(0).drained(); }, 100));
  for (int i = 1; i <= 3; ++i) {
    const Stream s = c.stream(RequestId(i));
    EXPECT_TRUE(s.finished) << i;
    EXPECT_EQ(s.status.code(), absl::StatusCode::kUnavailable) << i;
    EXPECT_THAT(std::string(s.status.message()), HasSubstr("drain deadline")) << i;
  }
  ExpectBaseline(c);
}

// Checklist (hang detection): a rank that stops taking part in the step's collectives
// makes every other rank's Step fail within the collective deadline — no hang.
TEST(EdgeCasesTest, DeadPeerIsAnErrorNotAHang) {
  ClusterOptions o = Base(3);
  o.collective_timeout = absl::Milliseconds(300);
  o.faults.push_back(comm::FaultRule::Fail(2, "vote", 3, absl::UnavailableError("rank died")));
  ScriptedCluster c(o);
  c.Submit(c.MakeRequest(1, 4, 40));
  absl::Status status;
  for (int i = 0; i < 10 && status.ok(); ++i) status = c.StepAll();
  ASSERT_FALSE(status.ok());
  for (int r = 0; r < 2; ++r) {
    // Peers see the failure as a deadline or an unavailable peer, never a hang.
    EXPECT_EQ(c.rank(r).Snapshot().step, 3) << "rank " << r;
  }
}

}  // namespace
}  // namespace lockstep::testing
