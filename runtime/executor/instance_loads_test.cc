#include "runtime/executor/instance_loads.h"

#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::exec {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::unique_ptr<kv::KvManager> Make(int32_t num_blocks) {
  kv::KvManagerConfig config;
  config.target.layout = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 4};
  config.target.num_blocks = num_blocks;
  config.target.enable_prefix_reuse = false;
  absl::StatusOr<std::unique_ptr<kv::KvManager>> m = kv::KvManager::Create(config);
  EXPECT_THAT(m, IsOk());
  return std::move(*m);
}

TEST(InstanceLoadsTest, EmptyBeforeTheFirstGather) {
  const InstanceLoads loads;
  EXPECT_THAT(loads.ranks(), IsEmpty());
  EXPECT_THAT(loads.free_target_blocks(), IsEmpty());
  EXPECT_EQ(loads.instance_counters().completed, 0);
}

TEST(InstanceLoadsTest, TheRowCarriesTheLoadAndThePools) {
  auto kv = Make(32);
  ASSERT_THAT(kv->CreateCache(RequestId(1)), IsOk());
  ASSERT_THAT(kv->Resize(RequestId(1), kv::PoolKind::kTarget, 8, 8), IsOk());
  ExecutorCounters counters;
  counters.completed = 5;
  counters.draft_k_steps[2] = 9;
  const InstanceLoads::Row row = InstanceLoads::LocalRow(3, 40, 2, *kv, counters);
  EXPECT_EQ(row[0], 3);
  EXPECT_EQ(row[1], 40);
  EXPECT_EQ(row[2], 2);
  EXPECT_EQ(row[3], 30);  // free target blocks
  EXPECT_EQ(row[4], 0);   // no draft pool
  EXPECT_EQ(row[5], 2);   // used target blocks
  EXPECT_EQ(row[6], 0);
  EXPECT_EQ(row[7], 30 * 4);  // free KV in tokens
}

TEST(InstanceLoadsTest, EveryRankIsSeenAndPerRankCountersAreSummed) {
  auto small = Make(8);
  auto large = Make(32);
  ExecutorCounters mine;  // rank 0
  mine.steps = 11;        // the same on every rank: kept as this rank's
  mine.completed = 2;
  mine.context_tokens = 100;
  mine.reused_tokens = 40;
  mine.draft_k_steps[1] = 3;
  ExecutorCounters other = mine;
  other.completed = 5;
  other.context_tokens = 10;
  other.reused_tokens = 0;
  other.draft_k_steps[1] = 4;
  std::vector<int64_t> all;
  for (const InstanceLoads::Row& row : {InstanceLoads::LocalRow(1, 16, 1, *small, mine),
                                        InstanceLoads::LocalRow(2, 50, 0, *large, other)}) {
    all.insert(all.end(), row.begin(), row.end());
  }
  InstanceLoads loads;
  int64_t schedulable = 4;  // added to
  const std::vector<sched::RankLoad> assignment_loads = loads.Absorb(all, 2, mine, &schedulable);
  EXPECT_EQ(schedulable, 5);
  ASSERT_EQ(assignment_loads.size(), 2u);
  EXPECT_EQ(assignment_loads[1].active_requests, 2);
  EXPECT_EQ(assignment_loads[1].active_tokens, 50);
  EXPECT_EQ(assignment_loads[1].free_kv_tokens, 32 * 4);
  EXPECT_THAT(loads.free_target_blocks(), ElementsAre(8, 32));
  EXPECT_THAT(loads.used_target_blocks(), ElementsAre(0, 0));
  EXPECT_THAT(loads.free_draft_blocks(), ElementsAre(0, 0));
  ASSERT_EQ(loads.ranks().size(), 2u);
  EXPECT_EQ(loads.ranks()[0].active_requests, 1);
  EXPECT_EQ(loads.ranks()[0].free_kv_tokens, 8 * 4);
  EXPECT_EQ(loads.ranks()[0].context_tokens, 100);
  EXPECT_EQ(loads.ranks()[0].reused_tokens, 40);
  EXPECT_EQ(loads.ranks()[1].context_tokens, 10);
  const ExecutorCounters& instance = loads.instance_counters();
  EXPECT_EQ(instance.steps, 11);
  EXPECT_EQ(instance.completed, 7);
  EXPECT_EQ(instance.context_tokens, 110);
  EXPECT_EQ(instance.draft_k_steps[1], 7);
  // A second gather replaces the first: nothing accumulates across steps.
  loads.Absorb(all, 2, mine, &schedulable);
  EXPECT_EQ(loads.instance_counters().completed, 7);
  EXPECT_EQ(loads.ranks().size(), 2u);
}

// A rank's KV tiers travel in its row: blocks copied down to the host tier, and those
// brought back from it when the device pool had evicted them.
TEST(InstanceLoadsTest, TheRowCarriesTheTiers) {
  kv::KvManagerConfig config;
  config.target.layout = {.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .tokens_per_block = 4};
  config.target.num_blocks = 4;
  config.tiers.host_bytes = 16 * static_cast<int64_t>(config.target.layout.BlockBytes());
  absl::StatusOr<std::unique_ptr<kv::KvManager>> made = kv::KvManager::Create(config);
  ASSERT_THAT(made, IsOk());
  kv::KvManager& kv = **made;
  const auto serve = [&kv](int64_t id, int32_t first, int n) {
    std::vector<int32_t> prompt(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) prompt[static_cast<size_t>(i)] = first + i;
    ASSERT_THAT(kv.CreateCache(RequestId(id), prompt).status(), IsOk());
    ASSERT_THAT(kv.Resize(RequestId(id), kv::PoolKind::kTarget, n, n), IsOk());
    ASSERT_THAT(kv.Commit(RequestId(id), prompt), IsOk());
    kv.Release(RequestId(id));
  };
  serve(1, 0, 9);     // 2 full blocks, copied down when released
  serve(2, 100, 16);  // 4 blocks: the device pool evicts the first prompt's
  serve(3, 0, 9);     // its 2 blocks come back from the host tier
  EXPECT_THAT(kv.FlushTiers(), IsOk());
  // A context leg of the same prompt handed off: the transfer may read its 2 full blocks
  // from the host tier's copies (pinned until the claim ends).
  std::vector<int32_t> leg(9);
  for (int i = 0; i < 9; ++i) leg[static_cast<size_t>(i)] = i;
  ASSERT_THAT(kv.CreateCache(RequestId(4), leg).status(), IsOk());
  ASSERT_THAT(kv.Resize(RequestId(4), kv::PoolKind::kTarget, 9, 9), IsOk());
  ASSERT_THAT(kv.Commit(RequestId(4), leg), IsOk());
  absl::StatusOr<std::shared_ptr<const kv::HostBlocks>> pinned =
      kv.PinHostBlocks(RequestId(4), leg);
  ASSERT_THAT(pinned, IsOk());
  ASSERT_NE(*pinned, nullptr);
  const auto gather = [&kv] {
    InstanceLoads loads;
    int64_t schedulable = 0;
    loads.Absorb(InstanceLoads::LocalRow(0, 0, 0, kv, ExecutorCounters()), 1, ExecutorCounters(),
                 &schedulable);
    EXPECT_EQ(loads.ranks().size(), 1u);
    return loads.ranks().empty() ? RankView::Tiers() : loads.ranks()[0].tiers;
  };
  EXPECT_EQ(gather().pinned_blocks, 2);
  EXPECT_EQ(gather().served_blocks, 0);
  // The transfer read both; the claim ends.
  (*pinned)->bytes_read += 2 * static_cast<int64_t>(config.target.layout.BlockBytes());
  kv.Release(RequestId(4));
  const RankView::Tiers t = gather();
  EXPECT_EQ(t.pinned_blocks, 0);
  EXPECT_EQ(t.served_blocks, 2);
  EXPECT_EQ(t.block_bytes, static_cast<int64_t>(config.target.layout.BlockBytes()));
  EXPECT_EQ(t.host_capacity_blocks, 16);
  EXPECT_EQ(t.host_hit_blocks, 2);
  EXPECT_EQ(t.disk_hit_blocks, 0);
  EXPECT_EQ(t.disk_capacity_blocks, 0);
  EXPECT_GE(t.host_blocks, 6);  // both prompts' blocks
  EXPECT_EQ(t.offloaded_blocks, t.host_blocks);
  EXPECT_GT(t.offload_ns, 0);
  EXPECT_GT(t.onboard_ns, 0);
}

}  // namespace
}  // namespace lockstep::exec
