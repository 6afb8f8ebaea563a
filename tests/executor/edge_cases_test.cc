// The executor edge-case checklist (docs/executor-edge-cases.md maps every item of the
// anchor's list to a test here, elsewhere, or a reason it does not apply).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/comm/faulty_communicator.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Checklist: a rank with only GENERATION_TO_COMPLETE requests while a peer has work
// must pad (its request is in flight, not schedulable).
TEST(EdgeCasesTest, RankWithOnlyToCompleteRequestsPads) {
  ScriptedCluster c(Base(2));
  auto a = c.MakeRequest(1, 4, 1, 0);   // rank 0: one token, to-complete after prefill
  auto b = c.MakeRequest(2, 4, 30, 1);  // rank 1: long
  c.Submit(a);
  c.Submit(b);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 0: both prefill; a is now to-complete
  ASSERT_EQ(c.rank(0).LiveIds(), std::vector<RequestId>{a.id});
  ASSERT_THAT(c.rank(0).DescribeRequests()[0], HasSubstr("generation_to_complete"));
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 1: rank 0 holds only `a`, in flight
  const exec::StepStats s = c.rank(0).step_stats().last();
  EXPECT_TRUE(s.padded);
  EXPECT_EQ(s.pad_source, exec::PadSource::kBeforeSchedule);
  EXPECT_FALSE(s.vetoed);
  RunToEnd(c, 2);
  EXPECT_EQ(c.rank(0).counters().vetoed_steps, 0);
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
  EXPECT_EQ(c.stream(b.id).tokens, c.ExpectedTokens(b));
  // Every dummy update is dropped as such; no real request's update went stale.
  EXPECT_GT(c.rank(0).counters().dummy_updates_dropped, 0);
  EXPECT_EQ(c.rank(0).counters().stale_updates, 0);
}

// Checklist: ranks that only await KV transfers are not schedulable; they pad only when
// some rank has forward work, and nobody pads (or vetoes) when every rank only waits.
TEST(EdgeCasesTest, RanksOnlyAwaitingTransfersDoNotPad) {
  ClusterOptions o = Base(2, sched::InstanceRole::kGeneration);
  o.rank_transfer_latency = {absl::Milliseconds(20), absl::Milliseconds(40)};
  ScriptedCluster c(o);
  c.Submit(c.MakeRequest(1, 4, 4, 0));
  c.Submit(c.MakeRequest(2, 4, 30, 1));
  while (c.rank(0).counters().transfers_received == 0) {
    ASSERT_LT(c.steps(), 100);
    ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  }
  // Until rank 0's KV arrived (polled at the start of its last step) both only received:
  // no pads, no vetoes. From then on rank 0 has work and rank 1, still receiving, pads.
  const int64_t arrived = c.steps() - 1;
  ASSERT_GT(arrived, 10);
  EXPECT_EQ(c.rank(1).counters().transfers_received, 0);
  const auto padded = [](const exec::StepStats& s) {
    return s.pad_source != exec::PadSource::kNone;
  };
  EXPECT_FALSE(FirstStep(c, 0, padded).has_value());
  const std::optional<exec::StepStats> first = FirstStep(c, 1, padded);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->step, arrived);
  EXPECT_EQ(first->pad_source, exec::PadSource::kBeforeSchedule);
  EXPECT_TRUE(first->padded);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(c.rank(r).counters().vetoed_steps, 0) << r;
  RunToEnd(c, 2);
  ExpectBaseline(c);
}

// Checklist: the pre-schedule dummy cannot get KV (compat: no reservation) -> no dummy
// forwarded, no second dummy after the schedule, no leak (the audit compares the pools
// with the state before the schedule), fleet veto, retry next step.
TEST(EdgeCasesTest, DummyWithoutKvVetoesWithoutLeaking) {
  ClusterOptions o = Base(2);
  o.scheduler.dummy_policy = sched::DummyPolicy::kCompat;
  o.scheduler.max_num_active_requests = 8;  // below the cap: only KV can refuse the pad
  o.num_blocks = 8;                         // 32 tokens per rank
  ScriptedCluster c(o);
  // Rank 0: four one-token requests fill its whole pool during prefill and then wait
  // (to-complete) for their token; nothing is left for a dummy. Rank 1 has work.
  std::vector<exec::NewRequestSpec> specs;
  for (int i = 1; i <= 4; ++i) specs.push_back(c.MakeRequest(i, 8, 1, 0));
  specs.push_back(c.MakeRequest(5, 4, 12, 1));
  for (const auto& s : specs) c.Submit(s);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  ASSERT_EQ(c.rank(0).kv().Stats().target.free_blocks, 0);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  const exec::StepStats s = c.rank(0).step_stats().last();
  EXPECT_EQ(s.pad_source, exec::PadSource::kBeforeSchedule);  // created, got no blocks
  EXPECT_EQ(s.pad_refusal, exec::PadRefusal::kDummyExists);   // no second dummy
  EXPECT_FALSE(s.padded);
  EXPECT_TRUE(s.vetoed);
  EXPECT_TRUE(c.rank(1).step_stats().last().deferred);
  RunToEnd(c, 5);
  EXPECT_EQ(c.rank(0).counters().vetoed_steps, 1);
  ExpectBaseline(c);
  for (const auto& spec : specs) {
    EXPECT_EQ(c.stream(spec.id).tokens, c.ExpectedTokens(spec)) << spec.id;
  }
}

// Checklist: a rank holding requests but scheduling nothing at max_num_active_requests
// is refused the post-schedule pad under compat (the fleet vetoes) and must not leak;
// under reserved it pads.
TEST(EdgeCasesTest, FullRankCannotPadUnderCompatButCanUnderReserved) {
  for (sched::DummyPolicy policy : {sched::DummyPolicy::kCompat, sched::DummyPolicy::kReserved}) {
    SCOPED_TRACE(sched::DummyPolicyName(policy));
    ClusterOptions o =
        WithDraft(Base(2, sched::InstanceRole::kGeneration), kv::DraftMode::kUnpaired);
    o.scheduler.max_batch_size = 1;
    o.scheduler.max_num_active_requests = 1;
    o.scheduler.dummy_policy = policy;
    o.rank_transfer_latency = {absl::Milliseconds(1), absl::Milliseconds(30)};
    ScriptedCluster c(o);
    c.Submit(c.MakeRequest(1, 8, 20, 0));
    c.Submit(c.MakeRequest(2, 8, 4, 1));  // rank 1: full, receiving for 30 steps
    RunToEnd(c, 2);
    ExpectBaseline(c);
    // Rank 1 only receives while rank 0 decodes: it must pad before the schedule.
    const auto receiving = [](const exec::StepStats& s) { return s.step >= 5 && s.step < 20; };
    const auto refused = FirstStep(c, 1, [&](const exec::StepStats& s) {
      return receiving(s) && s.pad_refusal == exec::PadRefusal::kAtCap && s.vetoed;
    });
    const auto padded = FirstStep(c, 1, [&](const exec::StepStats& s) {
      return receiving(s) && s.pad_source == exec::PadSource::kBeforeSchedule && s.padded;
    });
    if (policy == sched::DummyPolicy::kCompat) {
      EXPECT_GT(c.rank(0).counters().vetoed_steps, 0);
      EXPECT_TRUE(refused.has_value());
      EXPECT_FALSE(padded.has_value());
    } else {
      EXPECT_EQ(c.rank(0).counters().vetoed_steps, 0);
      EXPECT_FALSE(refused.has_value());
      EXPECT_TRUE(padded.has_value());
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
  // Rank 1 had a dummy with caches in both pools in each vetoed step; the audit found
  // both pools as before the schedule after each veto.
  int pending_dummy_vetoes = 0;
  for (const exec::StepStats& s : c.rank(1).step_stats().Snapshot()) {
    pending_dummy_vetoes += s.vetoed && s.pad_source == exec::PadSource::kBeforeSchedule &&
                            s.pad_refusal == exec::PadRefusal::kNone;
  }
  EXPECT_EQ(pending_dummy_vetoes, 10);
  ExpectBaseline(c);
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
}

// Checklist: can_queue false with a non-empty local batch defers the previous batch's
// update (the response gather still runs on every rank); with an empty local batch the
// previous batch is processed and cleared.
TEST(EdgeCasesTest, DeferralTable) {
  ClusterOptions o = Base(2);
  o.scheduler.dummy_policy = sched::DummyPolicy::kCompat;
  o.scheduler.max_num_active_requests = 1;
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 4, 30, 0);
  auto b = c.MakeRequest(2, 4, 1, 1);  // rank 1: one token, then to-complete
  c.Submit(a);
  c.Submit(b);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 0: both prefill
  ASSERT_TRUE(c.rank(1).has_batch_in_flight());
  // Step 1: rank 1 holds only `b` (in flight) and is at the cap, so compat refuses its
  // pad: its batch is empty and the fleet vetoes.
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  const exec::StepStats s0 = c.rank(0).step_stats().last();
  const exec::StepStats s1 = c.rank(1).step_stats().last();
  EXPECT_TRUE(s0.vetoed);
  EXPECT_TRUE(s0.deferred);  // rank 0 had a batch: its previous batch waits
  EXPECT_TRUE(c.rank(0).has_batch_in_flight());
  EXPECT_TRUE(s1.vetoed);
  EXPECT_EQ(s1.pad_refusal, exec::PadRefusal::kAtCap);
  EXPECT_FALSE(s1.deferred);  // rank 1's batch was empty: the previous one was processed
  EXPECT_FALSE(c.rank(1).has_batch_in_flight());  // ... and cleared
  EXPECT_EQ(s1.generated_tokens, 1);
  EXPECT_TRUE(c.stream(b.id).finished);
  RunToEnd(c, 2);
  ExpectBaseline(c);
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
  EXPECT_EQ(c.stream(b.id).tokens, c.ExpectedTokens(b));
}

// Checklist: a deferred batch processed after its request was cancelled and terminated:
// the update addressed to the closed cache is skipped (stale) and nothing leaks.
TEST(EdgeCasesTest, CancelWhileUpdateIsDeferred) {
  ClusterOptions o = Base(2);
  o.faults = {VetoAt(1, 7), VetoAt(1, 8)};
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 4, 50, 0);
  auto b = c.MakeRequest(2, 4, 50, 0);  // keeps rank 0's batch non-empty
  c.Submit(a);
  c.Submit(b);
  c.Submit(c.MakeRequest(3, 4, 50, 1));
  for (int i = 0; i < 8; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  ASSERT_TRUE(c.rank(0).step_stats().last().deferred);  // step 7: holds a's update
  c.Cancel(a.id);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 8: cancelled, vetoed, terminated
  ASSERT_TRUE(c.rank(0).step_stats().last().deferred);
  EXPECT_EQ(c.stream(a.id).reason, sched::FinishReason::kCancelled);
  EXPECT_FALSE(c.rank(0).kv().Has(a.id, kv::PoolKind::kTarget));
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 9: the deferred batch completes
  const exec::StepStats s = c.rank(0).step_stats().last();
  EXPECT_FALSE(s.vetoed);
  EXPECT_EQ(s.stale_updates, 1);  // a's; b's update applied
  EXPECT_EQ(s.dummy_updates_dropped, 0);
  RunToEnd(c, 3);
  const Stream st = c.stream(a.id);
  EXPECT_EQ(st.num_finished, 1);
  EXPECT_THAT(std::string(st.status.message()), HasSubstr("cancelled"));
  EXPECT_EQ(c.rank(0).counters().stale_updates, 1);
  EXPECT_EQ(c.stream(b.id).tokens, c.ExpectedTokens(b));
  ExpectBaseline(c);
}

// Checklist: a transfer error on one rank fails that request (with a message naming the
// context instance), the other ranks keep stepping, everything else completes.
TEST(EdgeCasesTest, TransferFailureFailsOnlyItsRequest) {
  ClusterOptions o = Base(2, sched::InstanceRole::kGeneration);
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
      EXPECT_TRUE(st.kv_pull_failed) << "the router retries a failed pull with a fresh context leg";
    } else {
      ++ok;
      EXPECT_EQ(st.tokens, c.ExpectedTokens(s));
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(ok, 0);
  // Each failure was a rank-local error published at that step's vote, seen by both.
  EXPECT_EQ(c.rank(0).counters().errors + c.rank(1).counters().errors, failed);
  EXPECT_GT(c.rank(0).counters().error_steps, 0);
  EXPECT_EQ(c.rank(0).counters().error_steps, c.rank(1).counters().error_steps);
  ExpectBaseline(c);
}

// Checklist (timeout without an in-flight cancel): the transceiver expires a receive at
// its deadline; the request fails with DeadlineExceeded and its blocks are freed.
TEST(EdgeCasesTest, TransferDeadline) {
  ClusterOptions o = Base(1, sched::InstanceRole::kGeneration);
  o.transfer_latency = absl::Milliseconds(500);
  o.transfer_deadline = absl::Milliseconds(50);
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 6, 6);
  c.Submit(a);
  RunToEnd(c, 1);
  const Stream s = c.stream(a.id);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.status.message()),
              HasSubstr("KV transfer from ctx rank 0 failed: KV receive deadline exceeded"));
  EXPECT_TRUE(s.kv_pull_failed);
  ExpectBaseline(c);
}

// Checklist (timeout with an in-flight cancel): at the drain deadline a receive still
// in flight is cancelled; its request fails only once the transceiver confirms that
// the receive stopped, and its blocks stay allocated until then.
TEST(EdgeCasesTest, DrainDeadlineCancelsAReceiveAndWaitsForTheTransceiver) {
  ClusterOptions o = Base(1, sched::InstanceRole::kGeneration);
  o.transfer_latency = absl::Milliseconds(500);
  o.drain_timeout = absl::Milliseconds(5);
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 6, 6);
  c.Submit(a);
  ASSERT_TRUE(c.StepUntil([&] { return c.transceiver(0).InFlight() == 1; }, 10));
  c.rank(0).inbox().Drain();
  // The step that cancels the receive keeps its blocks and the request; the next one
  // gets the transceiver's confirmation and fails the request.
  while (c.transceiver(0).InFlight() == 1) {
    ASSERT_LT(c.steps(), 50);
    ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  }
  EXPECT_TRUE(c.rank(0).kv().Has(a.id, kv::PoolKind::kTarget));
  EXPECT_FALSE(c.stream(a.id).finished);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  EXPECT_FALSE(c.rank(0).kv().Has(a.id, kv::PoolKind::kTarget));
  const Stream s = c.stream(a.id);
  EXPECT_TRUE(s.finished);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status.message()), HasSubstr("drain deadline"));
  EXPECT_FALSE(s.kv_pull_failed) << "the drain is this instance's doing, not the pull's";
  EXPECT_EQ(c.rank(0).counters().transfer_failures, 1);
  ASSERT_TRUE(c.StepUntil([&] { return c.rank(0).drained(); }, 20));
  ExpectBaseline(c);
}

// Checklist: a context-only request answers (first token, drafts, where its KV waits)
// before it is terminated; its blocks stay claimed until the send ends, then are freed.
TEST(EdgeCasesTest, ContextOnlyRespondsThenHoldsKvUntilSent) {
  ClusterOptions o = WithDraft(Base(2, sched::InstanceRole::kContext), kv::DraftMode::kUnpaired, 2);
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
