#include "runtime/router/routing/kv_aware_policy.h"

#include <vector>

#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

KvCandidate Candidate(const char* name, int64_t in_flight, int64_t cached_tokens = 0,
                      int32_t cached_rank = -1, int64_t free_blocks = 0) {
  return {.name = name,
          .in_flight = in_flight,
          .free_blocks = free_blocks,
          .cached_tokens = cached_tokens,
          .cached_rank = cached_rank};
}

TEST(KvAwarePolicyTest, PrefersTheCachedPrefixAndHintsItsRank) {
  uint64_t cursor = 0;
  const KvAwareDecision d = PickKvAware(
      {}, {Candidate("a", 2), Candidate("b", 3, /*cached=*/96, /*rank=*/1), Candidate("c", 2)},
      /*prompt_tokens=*/100, &cursor);
  EXPECT_EQ(d.index, 1u);
  EXPECT_EQ(d.rank_hint, 1);
  EXPECT_EQ(d.reason, RoutingReason::kPrefix);
  EXPECT_EQ(d.cached_tokens, 96);
}

// The index PickKvAware chooses from every round-robin start (-1 if they differ: a tie).
int PickFromEveryStart(const KvAwareWeights& weights, const std::vector<KvCandidate>& candidates,
                       int64_t prompt_tokens) {
  int picked = -2;
  for (uint64_t start = 0; start < candidates.size(); ++start) {
    uint64_t cursor = start;
    const int index =
        static_cast<int>(PickKvAware(weights, candidates, prompt_tokens, &cursor).index);
    if (picked != -2 && picked != index) return -1;
    picked = index;
  }
  return picked;
}

// A prefix the host tier holds is worth less than one on the device and more than a
// miss; the disk tier's less again; the weights set how much.
TEST(KvAwarePolicyTest, AHostHitRanksBetweenADeviceHitAndAMiss) {
  KvCandidate device = Candidate("device", 1, 64, 0);
  KvCandidate host = Candidate("host", 1, 64, 0);
  host.cached_host_tokens = 64;
  KvCandidate disk = Candidate("disk", 1, 64, 0);
  disk.cached_disk_tokens = 64;
  const KvCandidate miss = Candidate("miss", 1);
  EXPECT_EQ(PickFromEveryStart({}, {disk, host, miss, device}, 100), 3);
  EXPECT_EQ(PickFromEveryStart({}, {disk, miss, host}, 100), 2);
  EXPECT_EQ(PickFromEveryStart({}, {miss, disk}, 100), 1);
  uint64_t cursor = 0;
  const KvAwareDecision d = PickKvAware({}, {host, miss}, 100, &cursor);
  EXPECT_EQ(d.reason, RoutingReason::kPrefix);
  EXPECT_EQ(d.cached_tokens, 64);
  // A longer host prefix can beat a shorter device one (0.5 x 96 > 40), not a longer one.
  host.cached_tokens = host.cached_host_tokens = 96;
  EXPECT_EQ(PickFromEveryStart({}, {Candidate("short", 1, 40, 0), host}, 100), 1);
  EXPECT_EQ(PickFromEveryStart({}, {host, Candidate("long", 1, 56, 0)}, 100), 1);
  // Weighted like the device, the disk ties it; weighted 0, the host is a miss.
  EXPECT_EQ(PickFromEveryStart({.disk_hit = 1.0}, {disk, device}, 100), -1);
  EXPECT_EQ(PickFromEveryStart({.host_hit = 0.0}, {host, miss}, 100), -1);
  KvCandidate mixed = Candidate("mixed", 1, 64, 0);
  mixed.cached_host_tokens = 16;
  mixed.cached_disk_tokens = 16;
  EXPECT_DOUBLE_EQ(WeightedCachedTokens({}, mixed), 32 + 0.5 * 16 + 0.25 * 16);
}

// The rank a candidate's prefix counts on is the one with the most tokens weighted by
// tier: eight blocks on one rank's host tier lose to six on another's device.
TEST(KvAwarePolicyTest, TheBestRankIsChosenByTierWeightedTokens) {
  KvCandidate c = Candidate("a", 0);
  const std::vector<KvPrefixMatch> matches = {
      {.instance = "a", .rank = 0, .blocks = 8, .host_blocks = 8},
      {.instance = "a", .rank = 1, .blocks = 6},
      {.instance = "a", .rank = 2, .blocks = 9, .host_blocks = 3, .disk_blocks = 4}};
  ApplyPrefixMatches(matches, /*tokens_per_block=*/4, /*max_tokens=*/100, c);
  EXPECT_EQ(c.cached_rank, 1);
  EXPECT_EQ(c.cached_tokens, 24);
  EXPECT_EQ(c.cached_host_tokens, 0);
  EXPECT_EQ(c.cached_by_rank, (std::vector<int64_t>{32, 24, 36}));
  // Lower tiers worth as much as the device: rank 2's nine blocks win.
  ApplyPrefixMatches(matches, 4, 100, c, {.host_hit = 1.0, .disk_hit = 1.0});
  EXPECT_EQ(c.cached_rank, 2);
  EXPECT_EQ(c.cached_tokens, 36);
  EXPECT_EQ(c.cached_host_tokens, 12);
  EXPECT_EQ(c.cached_disk_tokens, 16);
}

TEST(KvAwarePolicyTest, LoadOutweighsASmallPrefix) {
  uint64_t cursor = 0;
  // b holds 10% of the prompt but has 9 requests in flight against a's 0.
  const KvAwareDecision d =
      PickKvAware({}, {Candidate("a", 0), Candidate("b", 9, 10, 0)}, 100, &cursor);
  EXPECT_EQ(d.index, 0u);
  EXPECT_EQ(d.rank_hint, -1);
  EXPECT_EQ(d.reason, RoutingReason::kLoad);
  // Weighted towards prefixes, the same state goes to b.
  const KvAwareDecision p = PickKvAware(
      {.prefix = 10.0, .load = 0.5}, {Candidate("a", 0), Candidate("b", 9, 10, 0)}, 100, &cursor);
  EXPECT_EQ(p.index, 1u);
  EXPECT_EQ(p.reason, RoutingReason::kPrefix);
}

TEST(KvAwarePolicyTest, WithoutPrefixesItIsLeastLoadThenFreeBlocksThenRoundRobin) {
  uint64_t cursor = 0;
  EXPECT_EQ(
      PickKvAware({}, {Candidate("a", 3), Candidate("b", 1), Candidate("c", 2)}, 10, &cursor).index,
      1u);
  EXPECT_EQ(
      PickKvAware({}, {Candidate("a", 1, 0, -1, 10), Candidate("b", 1, 0, -1, 50)}, 10, &cursor)
          .index,
      1u);
  std::vector<int> counts(3, 0);
  const std::vector<KvCandidate> tied = {Candidate("a", 0), Candidate("b", 0), Candidate("c", 0)};
  for (int i = 0; i < 9; ++i) ++counts[PickKvAware({}, tied, 10, &cursor).index];
  EXPECT_EQ(counts, (std::vector<int>{3, 3, 3}));
}

TEST(KvAwarePolicyTest, APrefixHeldAlikeByEveryRankRoutesWithoutAHint) {
  uint64_t cursor = 0;
  const KvAwareDecision d = PickKvAware(
      {}, {Candidate("a", 0, /*cached=*/64, /*rank=*/-1), Candidate("b", 0)}, 100, &cursor);
  EXPECT_EQ(d.index, 0u);
  EXPECT_EQ(d.reason, RoutingReason::kPrefix);
  EXPECT_EQ(d.rank_hint, -1);
  EXPECT_EQ(RoutingReasonName(RoutingReason::kRoundRobin), "round_robin");
}

TEST(KvAwarePolicyTest, FreeKvIsPartOfTheScore) {
  uint64_t cursor = 0;
  // Equal load, no prefix: a is short of KV (100 of b's 1000 free blocks) and loses.
  EXPECT_EQ(
      PickKvAware({}, {Candidate("a", 0, 0, -1, 100), Candidate("b", 0, 0, -1, 1000)}, 100, &cursor)
          .index,
      1u);
  // One request more on b (0.5 * 1/2 of load) outweighs a's shortage (0.25 * 0.9) at the
  // default weights; a larger free weight turns it.
  const std::vector<KvCandidate> c = {Candidate("a", 0, 0, -1, 100),
                                      Candidate("b", 1, 0, -1, 1000)};
  EXPECT_EQ(PickKvAware({}, c, 100, &cursor).index, 0u);
  EXPECT_EQ(PickKvAware({.prefix = 1.0, .load = 0.5, .free = 1.0}, c, 100, &cursor).index, 1u);
  // A quarter of the prompt cached beats being short of KV at the default weights.
  EXPECT_EQ(
      PickKvAware({}, {Candidate("a", 0, 25, 0, 100), Candidate("b", 0, 0, -1, 1000)}, 100, &cursor)
          .index,
      0u);
  // Without the free term, KV only breaks ties.
  EXPECT_EQ(
      PickKvAware({.prefix = 1.0, .load = 0.5, .free = 0.0},
                  {Candidate("a", 0, 0, -1, 100), Candidate("b", 1, 0, -1, 1000)}, 100, &cursor)
          .index,
      0u);
  // No candidate reported free blocks: the term is 0 for all.
  std::vector<int> counts(2, 0);
  for (int i = 0; i < 4; ++i) {
    ++counts[PickKvAware({}, {Candidate("a", 0), Candidate("b", 0)}, 100, &cursor).index];
  }
  EXPECT_EQ(counts, (std::vector<int>{2, 2}));
}

TEST(KvAwarePolicyTest, QueuedRequestsCountAsLoad) {
  uint64_t cursor = 0;
  std::vector<KvCandidate> c = {Candidate("a", 1), Candidate("b", 1)};
  c[0].queued = 5;
  EXPECT_EQ(PickKvAware({}, c, 10, &cursor).index, 1u);
}

TEST(KvAwarePolicyTest, PrefixMatchesPickTheLongestRankPerInstance) {
  std::vector<KvCandidate> c = {Candidate("a", 0), Candidate("b", 0), Candidate("c", 0)};
  const std::vector<KvPrefixMatch> matches = {
      {"a", 0, 2}, {"a", 1, 5}, {"b", 0, 3}, {"b", 1, 3}, {"x", 0, 9}};
  ApplyPrefixMatches(matches, /*tokens_per_block=*/16, /*prompt_tokens=*/70, &c);
  EXPECT_EQ(c[0].cached_tokens, 70);  // 5 blocks = 80 tokens, capped at the prompt
  EXPECT_EQ(c[0].cached_rank, 1);
  EXPECT_EQ(c[0].cached_by_rank, (std::vector<int64_t>{32, 70}));
  EXPECT_EQ(c[1].cached_tokens, 48);
  EXPECT_EQ(c[1].cached_rank, -1);  // both ranks hold it: no hint, the instance balances
  EXPECT_EQ(c[1].cached_by_rank, (std::vector<int64_t>{48, 48}));
  EXPECT_EQ(c[2].cached_tokens, 0);
  EXPECT_EQ(c[2].cached_rank, -1);
  EXPECT_TRUE(c[2].cached_by_rank.empty());
}

}  // namespace
}  // namespace lockstep::router
