#include "scheduler/rank_assignment.h"

#include <algorithm>
#include <random>
#include <vector>

#include "common/testing/seed.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::sched {
namespace {

using ::lockstep::testing::SeedTrace;
using ::lockstep::testing::TestSeed;
using ::testing::ElementsAre;

std::vector<NewRequest> Prompts(std::vector<int64_t> lengths) {
  std::vector<NewRequest> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    out.push_back({RequestId(static_cast<int64_t>(i) + 1), lengths[i], std::nullopt});
  }
  return out;
}

TEST(RankAssignmentTest, LongestPromptGoesToLeastLoadedRank) {
  // Rank 1 has the fewest active tokens, so the longest prompt goes there first.
  const std::vector<RankLoad> loads = {{1, 100}, {1, 10}, {1, 50}};
  const RankAssignment a = AssignRanks(loads, Prompts({5, 300, 20}), 8);
  EXPECT_EQ(a.expected_per_rank, 2);  // ceil((3 + 3) / 3) = 2
  EXPECT_THAT(a.rank_of, ElementsAre(0, 1, 2));
  EXPECT_TRUE(a.queued.empty());
}

TEST(RankAssignmentTest, TiesBreakByRequestCountThenRankId) {
  const std::vector<RankLoad> loads = {{2, 0}, {1, 0}, {1, 0}};
  const RankAssignment a = AssignRanks(loads, Prompts({7}), 8);
  EXPECT_THAT(a.rank_of, ElementsAre(1));  // rank 1 and 2 tie on tokens and count: lower id
}

TEST(RankAssignmentTest, ExpectedIsBoundedByTheBusiestRankAndTheCap) {
  // The busiest rank holds 4: others may fill up to 4 even if the balanced share is less.
  const std::vector<RankLoad> loads = {{4, 40}, {0, 0}};
  const RankAssignment a = AssignRanks(loads, Prompts({1, 1, 1, 1, 1}), 16);
  EXPECT_EQ(a.expected_per_rank, 5);  // ceil(9 / 2) = 5 >= 4
  EXPECT_EQ(std::count(a.rank_of.begin(), a.rank_of.end(), 1), 5);
  const RankAssignment capped = AssignRanks(loads, Prompts({1, 1, 1, 1, 1}), 3);
  EXPECT_EQ(capped.expected_per_rank, 3);
  EXPECT_THAT(capped.rank_of, ElementsAre(1, 1, 1, -1, -1));
  EXPECT_THAT(capped.queued, ElementsAre(3, 4));  // leader order
}

TEST(RankAssignmentTest, PinnedRequestsRespectTheCap) {
  std::vector<NewRequest> reqs = Prompts({10, 10, 10});
  reqs[0].pinned_rank = 1;
  reqs[1].pinned_rank = 0;  // rank 0 is full
  reqs[2].pinned_rank = 7;  // no such rank: waits
  const std::vector<RankLoad> loads = {{2, 0}, {0, 0}};
  const RankAssignment a = AssignRanks(loads, reqs, 2);
  EXPECT_THAT(a.rank_of, ElementsAre(1, -1, -1));
  EXPECT_THAT(a.queued, ElementsAre(1, 2));
}

TEST(RankAssignmentTest, RankHintsAreHonouredBelowTheCap) {
  // Without hints the longest prompt would go to rank 1 (fewest active tokens).
  std::vector<NewRequest> reqs = Prompts({50, 10, 10, 10});
  reqs[0].preferred_rank = 0;
  reqs[1].preferred_rank = 2;  // rank 2 is at the cap: balanced like an unhinted one
  reqs[2].preferred_rank = 9;  // no such rank: ignored
  reqs[3].pinned_rank = 1;
  const std::vector<RankLoad> loads = {{1, 100}, {0, 0}, {3, 30}};
  const RankAssignment a = AssignRanks(loads, reqs, 3);
  EXPECT_EQ(a.rank_of[0], 0);
  EXPECT_EQ(a.rank_of[3], 1);
  EXPECT_NE(a.rank_of[1], 2);
  EXPECT_NE(a.rank_of[2], 2);
  EXPECT_TRUE(a.queued.empty());
  // A hint never displaces a pin: with one slot left on rank 0, the pin takes it.
  std::vector<NewRequest> two = Prompts({10, 10});
  two[0].preferred_rank = 0;
  two[1].pinned_rank = 0;
  const RankAssignment b = AssignRanks(std::vector<RankLoad>{{1, 0}, {0, 0}}, two, 2);
  EXPECT_THAT(b.rank_of, ElementsAre(1, 0));
}

TEST(RankAssignmentTest, APromptGoesWhereItsKvFits) {
  // Rank 0 has the fewest tokens in flight but not the KV for 200 tokens.
  const std::vector<RankLoad> loads = {{1, 10, 50}, {1, 100, 1000}, {1, 90, 150}};
  EXPECT_THAT(AssignRanks(loads, Prompts({200}), 8).rank_of, ElementsAre(1));
  // Where no rank holds it, tokens in flight decide.
  EXPECT_THAT(AssignRanks(loads, Prompts({5000}), 8).rank_of, ElementsAre(0));
}

TEST(RankAssignmentTest, FreeKvBreaksTiesOfTokensInFlight) {
  const std::vector<RankLoad> loads = {{1, 50, 100}, {1, 50, 400}, {1, 60, 4000}};
  EXPECT_THAT(AssignRanks(loads, Prompts({10}), 8).rank_of, ElementsAre(1));
}

TEST(RankAssignmentTest, EachAssignmentTakesItsPromptFromTheFreeKv) {
  // A (300) fits rank 0 best; then rank 0 has 50 tokens of KV left, so B (100) goes to
  // rank 1 although rank 0 has fewer tokens in flight.
  const std::vector<RankLoad> loads = {{0, 0, 350}, {3, 400, 2000}, {4, 9000, 0}};
  const RankAssignment a = AssignRanks(loads, Prompts({300, 100}), 8);
  EXPECT_EQ(a.expected_per_rank, 4);  // rank 2 is at it
  EXPECT_THAT(a.rank_of, ElementsAre(0, 1));
}

TEST(RankAssignmentTest, TokenImbalanceIsTheLargestOverTheMean) {
  EXPECT_DOUBLE_EQ(TokenImbalance(std::vector<RankLoad>{{1, 100}, {1, 100}}), 1.0);
  EXPECT_DOUBLE_EQ(TokenImbalance(std::vector<RankLoad>{{1, 300}, {1, 100}}), 1.5);
  EXPECT_DOUBLE_EQ(TokenImbalance(std::vector<RankLoad>{{2, 90}, {0, 0}, {0, 0}}), 3.0);
  EXPECT_DOUBLE_EQ(TokenImbalance(std::vector<RankLoad>{{0, 0}, {0, 0}}), 1.0);  // idle
  EXPECT_DOUBLE_EQ(TokenImbalance({}), 1.0);
}

TEST(RankAssignmentTest, NoRanksQueuesEverything) {
  const RankAssignment a = AssignRanks({}, Prompts({1, 2}), 4);
  EXPECT_THAT(a.queued, ElementsAre(0, 1));
}

// Properties over random inputs: deterministic, caps never exceeded, every request
// either assigned or queued (in order), and the active-token spread stays bounded.
TEST(RankAssignmentTest, RandomizedProperties) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 2000; ++trial) {
    const int ranks = 1 + static_cast<int>(rng() % 8);
    const int64_t cap = 1 + static_cast<int64_t>(rng() % 16);
    std::vector<RankLoad> loads(ranks);
    for (RankLoad& l : loads) {
      l.active_requests = static_cast<int64_t>(rng() % (cap + 1));
      l.active_tokens = l.active_requests * static_cast<int64_t>(rng() % 200);
      if (rng() % 2 == 0) l.free_kv_tokens = static_cast<int64_t>(rng() % 2000);
    }
    std::vector<NewRequest> reqs;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      NewRequest r{RequestId(i), 1 + static_cast<int64_t>(rng() % 500), std::nullopt};
      if (rng() % 10 == 0) r.pinned_rank = static_cast<int32_t>(rng() % (ranks + 1));
      reqs.push_back(r);
    }
    const RankAssignment a = AssignRanks(loads, reqs, cap);
    const RankAssignment again = AssignRanks(loads, reqs, cap);
    ASSERT_EQ(a.rank_of, again.rank_of) << "trial " << trial;

    std::vector<RankLoad> after = loads;
    std::vector<int32_t> queued;
    for (int i = 0; i < n; ++i) {
      if (a.rank_of[i] < 0) {
        queued.push_back(i);
        continue;
      }
      ASSERT_LT(a.rank_of[i], ranks);
      if (reqs[i].pinned_rank.has_value()) {
        ASSERT_EQ(a.rank_of[i], *reqs[i].pinned_rank);
      }
      after[a.rank_of[i]].active_requests += 1;
      after[a.rank_of[i]].active_tokens += reqs[i].prompt_tokens;
    }
    ASSERT_EQ(queued, a.queued) << "trial " << trial;
    for (int r = 0; r < ranks; ++r) {
      if (after[r].active_requests > loads[r].active_requests) {
        ASSERT_LE(after[r].active_requests, cap) << "trial " << trial << " rank " << r;
      }
    }
    // A queued unpinned request means every rank was at the expected count.
    const bool unpinned_queued = std::any_of(
        queued.begin(), queued.end(), [&](int32_t i) { return !reqs[i].pinned_rank.has_value(); });
    if (unpinned_queued) {
      for (int r = 0; r < ranks; ++r) {
        ASSERT_GE(after[r].active_requests, a.expected_per_rank) << "trial " << trial;
      }
    }
  }
}

// Spread bound: on idle ranks with no pins, assigning requests one batch at a time
// keeps the max-min active-token spread within the longest prompt.
TEST(RankAssignmentTest, SpreadBoundedByLongestPrompt) {
  const uint64_t seed = TestSeed();
  SCOPED_TRACE(SeedTrace(seed));
  std::mt19937_64 rng(seed + 1);
  for (int trial = 0; trial < 500; ++trial) {
    const int ranks = 2 + static_cast<int>(rng() % 7);
    std::vector<RankLoad> loads(ranks);
    std::vector<NewRequest> reqs;
    int64_t longest = 0;
    const int n = ranks * (1 + static_cast<int>(rng() % 4));
    for (int i = 0; i < n; ++i) {
      reqs.push_back({RequestId(i), 1 + static_cast<int64_t>(rng() % 300), std::nullopt});
      longest = std::max(longest, reqs.back().prompt_tokens);
    }
    const RankAssignment a = AssignRanks(loads, reqs, 1000);
    for (int i = 0; i < n; ++i) {
      ASSERT_GE(a.rank_of[i], 0);
      loads[a.rank_of[i]].active_tokens += reqs[i].prompt_tokens;
    }
    int64_t lo = loads[0].active_tokens, hi = lo;
    for (const RankLoad& l : loads) {
      lo = std::min(lo, l.active_tokens);
      hi = std::max(hi, l.active_tokens);
    }
    ASSERT_LE(hi - lo, longest) << "trial " << trial;
  }
}

}  // namespace
}  // namespace lockstep::sched
