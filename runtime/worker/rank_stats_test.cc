#include "runtime/worker/rank_stats.h"

#include "gtest/gtest.h"

namespace lockstep::worker {
namespace {

TEST(RankStatsTest, EveryRankInOrderAndTheImbalance) {
  exec::ExecutorSnapshot snapshot;
  snapshot.ranks = {{2, 300, 1000, 500, 120}, {0, 0, 4000, 80, 0}};
  snapshot.token_imbalance = 2.0;
  v1::StatsResponse out;
  SetRankStats(snapshot, &out);
  ASSERT_EQ(out.ranks_size(), 2);
  EXPECT_EQ(out.ranks(0).rank(), 0);
  EXPECT_EQ(out.ranks(0).active_requests(), 2);
  EXPECT_EQ(out.ranks(0).active_tokens(), 300);
  EXPECT_EQ(out.ranks(0).free_kv_tokens(), 1000);
  EXPECT_EQ(out.ranks(0).prompt_tokens(), 500);
  EXPECT_EQ(out.ranks(0).prefix_tokens_reused(), 120);
  EXPECT_EQ(out.ranks(1).rank(), 1);
  EXPECT_EQ(out.ranks(1).prompt_tokens(), 80);
  EXPECT_EQ(out.ranks(1).prefix_tokens_reused(), 0);
  EXPECT_DOUBLE_EQ(out.active_token_imbalance(), 2.0);
}

}  // namespace
}  // namespace lockstep::worker
