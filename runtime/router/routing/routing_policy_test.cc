#include "runtime/router/routing/routing_policy.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace lockstep::router {
namespace {

using config::RoutingPolicy;

TEST(RoutingPolicyTest, RoundRobinVisitsEveryCandidateInTurn) {
  const std::vector<RoutingCandidate> candidates = {{"a", 5, 0}, {"b", 0, 0}, {"c", 9, 0}};
  uint64_t cursor = 0;
  std::vector<size_t> picks;
  for (int i = 0; i < 6; ++i) {
    picks.push_back(PickCandidate(RoutingPolicy::kRoundRobin, candidates, &cursor));
  }
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(cursor, 6u);
}

TEST(RoutingPolicyTest, LeastLoadPicksFewestInFlight) {
  const std::vector<RoutingCandidate> candidates = {{"a", 3, 0}, {"b", 1, 0}, {"c", 2, 0}};
  for (uint64_t start = 0; start < 3; ++start) {
    uint64_t cursor = start;
    EXPECT_EQ(PickCandidate(RoutingPolicy::kLeastLoad, candidates, &cursor), 1u);
  }
}

TEST(RoutingPolicyTest, LeastLoadBreaksTiesByFreeBlocksThenRotates) {
  uint64_t cursor = 0;
  EXPECT_EQ(
      PickCandidate(RoutingPolicy::kLeastLoad, {{"a", 1, 10}, {"b", 1, 50}, {"c", 2, 99}}, &cursor),
      1u);
  // Full ties rotate with the cursor.
  const std::vector<RoutingCandidate> tied = {{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}};
  std::map<size_t, int> counts;
  cursor = 0;
  for (int i = 0; i < 9; ++i) ++counts[PickCandidate(RoutingPolicy::kLeastLoad, tied, &cursor)];
  EXPECT_EQ(counts, (std::map<size_t, int>{{0, 3}, {1, 3}, {2, 3}}));
}

TEST(RoutingPolicyTest, SingleCandidate) {
  uint64_t cursor = 41;
  EXPECT_EQ(PickCandidate(RoutingPolicy::kLeastLoad, {{"only", 100, 0}}, &cursor), 0u);
  EXPECT_EQ(PickCandidate(RoutingPolicy::kRoundRobin, {{"only", 100, 0}}, &cursor), 0u);
}

}  // namespace
}  // namespace lockstep::router
