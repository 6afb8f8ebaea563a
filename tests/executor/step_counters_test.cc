// Counters that mean what they say: rank-local errors travel in the vote and are
// counted per step and per rank; a failed engine batch is an error even when it held
// only the pad dummy; dummy updates are dropped as such, and only a real request's
// update to a closed or re-created cache counts as stale.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec_decode/speculative_config.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

using ::testing::HasSubstr;

bool DummyOnly(const engine::Batch& batch) {
  return batch.context.empty() && batch.generation.size() == 1 && batch.generation[0].is_dummy;
}

// Rank 1 only pads while rank 0 decodes; rank 1's engine fails its step-3 batch, which
// holds nothing but the dummy. The failure is counted and published at the next vote.
TEST(StepCountersTest, EngineFailureOfADummyOnlyBatchIsAnError) {
  constexpr int64_t kFailedStep = 3;
  ClusterOptions o = Base(2);
  o.fail_batch = [](int rank, const engine::Batch& batch) {
    return rank == 1 && batch.step.value() == kFailedStep && DummyOnly(batch);
  };
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 4, 12, 0);
  c.Submit(a);
  RunToEnd(c, 1);
  ASSERT_TRUE(c.rank(1).step_stats().Snapshot()[kFailedStep].padded);

  EXPECT_EQ(c.rank(1).counters().engine_failures, 1);
  EXPECT_EQ(c.rank(1).counters().errors, 1);
  EXPECT_EQ(c.rank(1).counters().failed, 0);  // no request to fail
  EXPECT_EQ(c.rank(0).counters().errors, 0);
  // Collected at step 4 (after that step's vote), published at step 5's vote.
  for (int r = 0; r < 2; ++r) {
    const auto voted = FirstStep(c, r, [](const exec::StepStats& s) { return s.max_rank_errors; });
    ASSERT_TRUE(voted.has_value()) << "rank " << r;
    EXPECT_EQ(voted->step, kFailedStep + 2) << "rank " << r;
    EXPECT_EQ(voted->max_rank_errors, 1) << "rank " << r;
    EXPECT_EQ(voted->errors, r == 1 ? 1 : 0) << "rank " << r;
    EXPECT_EQ(c.rank(r).counters().error_steps, 1) << "rank " << r;
  }
  EXPECT_EQ(c.rank(0).Snapshot().instance_counters.errors, 1);
  EXPECT_EQ(c.rank(0).Snapshot().instance_counters.engine_failures, 1);
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
  ExpectBaseline(c);
}

// A failed batch with real requests fails each of them: one error for the batch and
// one per request, in the same vote.
TEST(StepCountersTest, EngineFailureFailsTheRequestsOfItsBatch) {
  ClusterOptions o = Base(2);
  o.fail_batch = [](int rank, const engine::Batch& batch) {
    return rank == 0 && batch.step.value() == 2;
  };
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 4, 12, 0);
  auto b = c.MakeRequest(2, 4, 12, 0);
  auto other = c.MakeRequest(3, 4, 12, 1);
  for (const auto& s : {a, b, other}) c.Submit(s);
  RunToEnd(c, 3);
  for (const auto& s : {a, b}) {
    EXPECT_EQ(c.stream(s.id).reason, sched::FinishReason::kError) << s.id;
    EXPECT_THAT(std::string(c.stream(s.id).status.message()),
                HasSubstr("engine step 2 failed: injected engine failure"));
  }
  EXPECT_EQ(c.stream(other.id).tokens, c.ExpectedTokens(other));
  EXPECT_EQ(c.rank(0).counters().engine_failures, 1);
  EXPECT_EQ(c.rank(0).counters().failed, 2);
  EXPECT_EQ(c.rank(0).counters().errors, 3);
  const auto voted = FirstStep(c, 1, [](const exec::StepStats& s) { return s.max_rank_errors; });
  ASSERT_TRUE(voted.has_value());
  EXPECT_EQ(voted->max_rank_errors, 3);
  EXPECT_EQ(voted->errors, 0);
  ExpectBaseline(c);
}

// Padding is routine: its updates are dropped and counted apart, so ranks that only
// pad count no stale update at all.
TEST(StepCountersTest, DummyUpdatesAreNotStaleUpdates) {
  ClusterOptions o = WithDraft(Base(3), kv::DraftMode::kUnpaired);
  ScriptedCluster c(o);
  auto a = c.MakeRequest(1, 6, 20, 0);
  c.Submit(a);
  RunToEnd(c, 1);
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // idle: all collected
  for (int r = 1; r < 3; ++r) {
    const exec::ExecutorCounters& n = c.rank(r).counters();
    // The target and draft update of every forwarded dummy.
    EXPECT_GT(n.padded_steps, 10) << "rank " << r;
    EXPECT_EQ(n.dummy_updates_dropped, 2 * n.padded_steps) << "rank " << r;
    EXPECT_EQ(n.stale_updates, 0) << "rank " << r;
  }
  EXPECT_EQ(c.stream(a.id).tokens, c.ExpectedTokens(a));
}

// Every verified generation step is counted under the K it ran with, and every
// generation request under the K of its next step (a gauge); with dynamic K and half
// the drafts rejected, K moves below its maximum. The instance's counts are the sum of
// the ranks' (as of the last load all-gather).
TEST(StepCountersTest, DraftKStepsCountEveryGenerationStepByItsK) {
  constexpr int kMaxK = 4;
  ClusterOptions o = WithDraft(Base(2), kv::DraftMode::kUnpaired, kMaxK);
  o.scheduler.speculative.dynamic = true;
  o.draft_acceptance = 0.5;
  ScriptedCluster c(o);
  std::vector<exec::NewRequestSpec> specs;
  for (int i = 0; i < 4; ++i) specs.push_back(c.MakeRequest(i + 1, 6, 40, i % 2));
  for (const auto& s : specs) c.Submit(s);
  int64_t most_generating = 0, below_max = 0;
  for (int i = 0; i < 2000 && !c.AllFinished(4); ++i) {
    ASSERT_NO_FATAL_FAILURE(StepAudited(c));
    exec::DraftKCounts requests{};
    for (int r = 0; r < 2; ++r) {
      const exec::DraftKCounts& mine = c.rank(r).counters().draft_k_requests;
      for (size_t k = 0; k < mine.size(); ++k) requests[k] += mine[k];
    }
    ASSERT_EQ(c.rank(0).Snapshot().instance_counters.draft_k_requests, requests) << "step " << i;
    int64_t generating = 0;
    for (size_t k = 0; k < requests.size(); ++k) {
      if (static_cast<int>(k) > kMaxK) EXPECT_EQ(requests[k], 0) << "K " << k;
      generating += requests[k];
      if (static_cast<int>(k) < kMaxK) below_max += requests[k];
    }
    EXPECT_LE(generating, 4);
    most_generating = std::max(most_generating, generating);
  }
  ASSERT_TRUE(c.AllFinished(4));
  EXPECT_EQ(most_generating, 4) << "every request was counted while it generated";
  EXPECT_GT(below_max, 0) << "dynamic K moved requests below the instance's K";
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // idle: all gathered
  EXPECT_EQ(c.rank(0).Snapshot().instance_counters.draft_k_requests, exec::DraftKCounts{})
      << "no request left: the gauge is back at 0";

  exec::DraftKCounts sum{};
  for (int r = 0; r < 2; ++r) {
    const exec::ExecutorCounters& n = c.rank(r).counters();
    int64_t steps = 0, most_drafts = 0, used_buckets = 0;
    for (size_t k = 0; k < n.draft_k_steps.size(); ++k) {
      if (static_cast<int>(k) > kMaxK) EXPECT_EQ(n.draft_k_steps[k], 0) << "rank " << r << " K " << k;
      steps += n.draft_k_steps[k];
      most_drafts += static_cast<int64_t>(k) * n.draft_k_steps[k];
      used_buckets += n.draft_k_steps[k] > 0 ? 1 : 0;
      sum[k] += n.draft_k_steps[k];
    }
    EXPECT_GT(steps, 0) << "rank " << r;
    EXPECT_GT(n.drafts_proposed, 0) << "rank " << r;
    EXPECT_LE(n.drafts_proposed, most_drafts) << "rank " << r;
    EXPECT_LE(n.drafts_accepted, n.drafts_proposed) << "rank " << r;
    EXPECT_GE(used_buckets, 2) << "rank " << r << ": dynamic K never moved";
  }
  const exec::ExecutorSnapshot snap = c.rank(0).Snapshot();
  EXPECT_EQ(snap.instance_counters.draft_k_steps, sum);
  EXPECT_EQ(c.rank(0).spec_method(), spec::Method::kDraftModel);
  for (const auto& s : specs) EXPECT_EQ(c.stream(s.id).tokens, c.ExpectedTokens(s));
}

// Acceptance by draft position: every verified step counts each draft it proposed at
// its position, and each it accepted (a prefix), so position j's counts never exceed
// position j - 1's, their sums are the drafts proposed and accepted, and the instance's
// counts are the sum of the ranks'.
TEST(StepCountersTest, DraftPositionsCountEveryProposedAndAcceptedDraft) {
  constexpr int kK = 3;
  ClusterOptions o = WithDraft(Base(2), kv::DraftMode::kPaired, kK);
  o.draft_acceptance = 0.6;
  ScriptedCluster c(o);
  std::vector<exec::NewRequestSpec> specs;
  for (int i = 0; i < 4; ++i) specs.push_back(c.MakeRequest(i + 1, 6, 40, i % 2));
  for (const auto& s : specs) c.Submit(s);
  for (int i = 0; i < 2000 && !c.AllFinished(4); ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  ASSERT_TRUE(c.AllFinished(4));
  for (int i = 0; i < 2; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // idle: all gathered
  exec::DraftKCounts proposed{}, accepted{};
  for (int r = 0; r < 2; ++r) {
    const exec::ExecutorCounters& n = c.rank(r).counters();
    EXPECT_EQ(n.draft_position_proposed[0], 0) << "rank " << r;
    EXPECT_EQ(n.draft_position_accepted[0], 0) << "rank " << r;
    int64_t proposed_sum = 0, accepted_sum = 0;
    for (size_t j = 1; j < n.draft_position_proposed.size(); ++j) {
      if (static_cast<int>(j) > kK) EXPECT_EQ(n.draft_position_proposed[j], 0) << "rank " << r;
      if (j > 1) {
        EXPECT_LE(n.draft_position_proposed[j], n.draft_position_proposed[j - 1]) << j;
        EXPECT_LE(n.draft_position_accepted[j], n.draft_position_accepted[j - 1]) << j;
      }
      EXPECT_LE(n.draft_position_accepted[j], n.draft_position_proposed[j]) << j;
      proposed_sum += n.draft_position_proposed[j];
      accepted_sum += n.draft_position_accepted[j];
      proposed[j] += n.draft_position_proposed[j];
      accepted[j] += n.draft_position_accepted[j];
    }
    EXPECT_EQ(proposed_sum, n.drafts_proposed) << "rank " << r;
    EXPECT_EQ(accepted_sum, n.drafts_accepted) << "rank " << r;
    EXPECT_GT(n.draft_position_proposed[kK], 0) << "rank " << r;
    // Some first drafts were accepted and some rejected.
    EXPECT_GT(n.draft_position_accepted[1], 0) << "rank " << r;
    EXPECT_LT(n.draft_position_accepted[1], n.draft_position_proposed[1]) << "rank " << r;
  }
  const exec::ExecutorSnapshot snap = c.rank(0).Snapshot();
  EXPECT_EQ(snap.instance_counters.draft_position_proposed, proposed);
  EXPECT_EQ(snap.instance_counters.draft_position_accepted, accepted);
  for (const auto& s : specs) EXPECT_EQ(c.stream(s.id).tokens, c.ExpectedTokens(s));
}

}  // namespace
}  // namespace lockstep::testing
