// Cache identity across a deferral (docs/design.md §7.6): an update computed for a cache
// applies to that cache only. When the request's id has a new cache by the time a
// deferred update runs (paused and recomputed, or cancelled and its id submitted
// again), the update is skipped as stale and the new cache keeps its own lengths.
// Every step is audited, including ownership by (id, generation).
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"
#include "tests/executor/scenario.h"

namespace lockstep::testing {
namespace {

constexpr kv::PoolKind kTarget = kv::PoolKind::kTarget;

uint64_t Generation(ScriptedCluster& c, int rank, RequestId id) {
  const std::optional<kv::CacheInfo> info = c.rank(rank).kv().Info(id, kTarget);
  return info.has_value() ? info->generation : 0;
}

// Cancel, then the same id again: the deferred update of the first request must not
// touch the second one's cache.
TEST(CacheIdentityTest, DeferredUpdateSkipsTheCacheOfAReusedId) {
  ClusterOptions o = Base(2);
  o.faults = {VetoAt(1, 7), VetoAt(1, 8)};
  ScriptedCluster c(o);
  const auto first = c.MakeRequest(1, 4, 50, 0);
  const auto other = c.MakeRequest(2, 4, 50, 0);  // keeps rank 0's batch non-empty
  c.Submit(first);
  c.Submit(other);
  for (int i = 0; i < 8; ++i) ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  ASSERT_TRUE(c.rank(0).step_stats().last().deferred);  // step 7 holds step 6's batch
  const uint64_t old_generation = Generation(c, 0, first.id);
  c.Cancel(first.id);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 8: cancelled, vetoed, terminated
  ASSERT_TRUE(c.rank(0).step_stats().last().deferred);
  ASSERT_EQ(Generation(c, 0, first.id), 0u);
  const size_t streamed = c.stream(first.id).tokens.size();

  const auto again = c.MakeRequest(1, 4, 50, 0);  // the same id, a new request
  c.Submit(again);
  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // step 9: admitted, prefilled, deferred done
  const uint64_t new_generation = Generation(c, 0, again.id);
  EXPECT_GT(new_generation, old_generation);
  const exec::StepStats s = c.rank(0).step_stats().last();
  EXPECT_FALSE(s.vetoed);
  EXPECT_EQ(s.stale_updates, 1);  // the first request's update, addressed to old_generation
  // The new cache holds only what its own prefill granted: nothing was applied to it.
  const kv::CacheInfo info = *c.rank(0).kv().Info(again.id, kTarget);
  EXPECT_EQ(info.history, 0);
  EXPECT_EQ(info.capacity, 4);

  ASSERT_TRUE(c.StepUntil([&] { return c.stream(again.id).num_finished == 2; }, 200));
  RunToEnd(c, 2);
  const std::vector<int32_t> tokens = c.stream(again.id).tokens;
  ASSERT_GE(tokens.size(), streamed);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin() + static_cast<int64_t>(streamed), tokens.end()),
            c.ExpectedTokens(again));
  EXPECT_EQ(c.rank(0).counters().stale_updates, 1);
  EXPECT_EQ(c.rank(0).counters().audit_violations, 0);
  ExpectBaseline(c);
}

// Rank 0: two requests in a pool too small for both to finish. B crosses a block
// boundary one step before A; in the next step A finds no block and pauses B, and
// that step is vetoed, so the batch that holds B's last step is deferred. With
// 4-token chunks B's recompute starts at once, in the next (forwarded) step: B has a new
// cache when its deferred update runs.
ClusterOptions PauseScenario() {
  ClusterOptions o = Base(2);
  o.num_blocks = 7;  // 6 usable: one block is reserved for the dummy
  o.scheduler.chunk_size = 4;
  return o;
}

void SubmitPauseScenario(ScriptedCluster& c) {
  c.Submit(c.MakeRequest(1, 8, 12, 0));  // A
  c.Submit(c.MakeRequest(2, 5, 12, 0));  // B
}

TEST(CacheIdentityTest, DeferredUpdateSkipsTheCacheOfAPausedAndRecomputedRequest) {
  const RequestId b(2);
  // A first run, without vetoes, finds the step at which rank 0 pauses B.
  int64_t pause_step = -1;
  {
    ScriptedCluster probe(PauseScenario());
    SubmitPauseScenario(probe);
    while (probe.rank(0).counters().paused == 0) {
      ASSERT_LT(probe.steps(), 100) << "the scenario never pauses";
      ASSERT_NO_FATAL_FAILURE(StepAudited(probe));
    }
    pause_step = probe.steps() - 1;
  }
  ClusterOptions o = PauseScenario();
  o.faults = {VetoAt(1, pause_step)};
  ScriptedCluster c(o);
  SubmitPauseScenario(c);
  while (c.steps() < pause_step) ASSERT_NO_FATAL_FAILURE(StepAudited(c));
  const uint64_t old_generation = Generation(c, 0, b);
  ASSERT_NE(old_generation, 0u);

  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // B paused, step vetoed, previous batch deferred
  ASSERT_EQ(c.rank(0).counters().paused, 1) << "step " << pause_step;
  ASSERT_TRUE(c.rank(0).step_stats().last().deferred);
  ASSERT_EQ(Generation(c, 0, b), 0u);

  ASSERT_NO_FATAL_FAILURE(StepAudited(c));  // B recomputes; the deferred batch completes
  const exec::StepStats s = c.rank(0).step_stats().last();
  EXPECT_FALSE(s.vetoed);
  EXPECT_GT(Generation(c, 0, b), old_generation) << "B was not re-created in this step";
  EXPECT_EQ(s.stale_updates, 1);  // B's, addressed to old_generation
  const kv::CacheInfo info = *c.rank(0).kv().Info(b, kTarget);
  EXPECT_EQ(info.history, 0);  // its first recompute chunk is in flight
  EXPECT_EQ(info.capacity, 4);

  RunToEnd(c, 2);
  EXPECT_EQ(c.stream(b).tokens, c.ExpectedTokens(c.MakeRequest(2, 5, 12, 0)));
  EXPECT_EQ(c.stream(RequestId(1)).tokens, c.ExpectedTokens(c.MakeRequest(1, 8, 12, 0)));
  ExpectBaseline(c);
}

}  // namespace
}  // namespace lockstep::testing
