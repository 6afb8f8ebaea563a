// Attention-DP balance through real executors: every rank learns every rank's tokens in
// flight, free KV and prefix-reuse counters from the load all-gather; new requests go
// where the tokens in flight are fewest (the same assignment on every rank); the
// imbalance figure is the busiest rank's tokens in flight over the mean.
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

TEST(RankBalanceTest, LoadsImbalanceAndReuseArePublishedPerRank) {
  ClusterOptions o = Base(2);
  o.scheduler.max_num_active_requests = 8;
  o.scheduler.prefix_reuse = true;
  ScriptedCluster c(o);
  // Rank 0 holds two long requests (pinned); rank 1 nothing.
  c.Submit(c.MakeRequest(1, 60, 40, /*pinned_rank=*/0));
  c.Submit(c.MakeRequest(2, 60, 40, /*pinned_rank=*/0));
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  const exec::ExecutorSnapshot s0 = c.rank(0).Snapshot();
  const exec::ExecutorSnapshot s1 = c.rank(1).Snapshot();
  ASSERT_EQ(s0.ranks.size(), 2u);
  EXPECT_EQ(s0.ranks[0].active_requests, 2);
  EXPECT_EQ(s0.ranks[1].active_requests, 0);
  EXPECT_GE(s0.ranks[0].active_tokens, 120);  // prompts, and what they generated
  EXPECT_EQ(s0.ranks[1].active_tokens, 0);
  EXPECT_GT(s0.ranks[1].free_kv_tokens, s0.ranks[0].free_kv_tokens);
  EXPECT_DOUBLE_EQ(s0.token_imbalance, 2.0);  // one of two ranks holds everything
  EXPECT_DOUBLE_EQ(s1.token_imbalance, s0.token_imbalance);
  EXPECT_EQ(s0.ranks[0].context_tokens, 120);
  EXPECT_EQ(s1.ranks[0].context_tokens, 120);  // every rank knows every rank's

  // Unpinned requests go to rank 1, which has the fewer tokens in flight; one reusing
  // rank 0's prompt too (without a hint, load decides).
  exec::NewRequestSpec same = c.MakeRequest(1, 60, 4);
  same.id = RequestId(3);
  c.Submit(same);
  c.Submit(c.MakeRequest(4, 10, 4));
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  EXPECT_EQ(c.rank(1).LiveIds(), (std::vector<RequestId>{RequestId(3), RequestId(4)}));
  ASSERT_NO_FATAL_FAILURE(RunToEnd(c, 4));
  // A request hinted to rank 0 reuses its prefix there.
  exec::NewRequestSpec hinted = c.MakeRequest(1, 60, 4);
  hinted.id = RequestId(5);
  hinted.preferred_rank = 0;
  c.Submit(hinted);
  ASSERT_NO_FATAL_FAILURE(RunToEnd(c, 5));
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  const exec::ExecutorSnapshot end = c.rank(0).Snapshot();
  EXPECT_EQ(end.ranks[0].reused_tokens, 56);  // 14 blocks of 4: all but the last token
  EXPECT_EQ(end.ranks[1].reused_tokens, 0);
  EXPECT_EQ(end.ranks[0].context_tokens, 180);
  EXPECT_EQ(end.ranks[1].context_tokens, 70);
  EXPECT_DOUBLE_EQ(end.token_imbalance, 1.0);  // idle
  ExpectBaseline(c);
}

}  // namespace
}  // namespace lockstep::testing
