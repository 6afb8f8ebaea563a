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
