// Aggregated serving with a host KV tier reports the prefix a request reused
// (usage.cached_tokens) even when the request was paused before its prefill began:
// while its prefix is copied back from the tier it holds device blocks without having
// run, so an older request that needs room pauses it; when it starts again its prefill
// is still the first one for its prompt, and the reuse of that start is its answer.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {
namespace {

using ::testing::IsEmpty;

constexpr int kTpb = 4;

ClusterOptions AggCluster() {
  ClusterOptions o;
  o.ranks = 1;
  o.role = sched::InstanceRole::kAggregated;
  o.tokens_per_block = kTpb;
  o.num_blocks = 12;
  o.host_tier_blocks = 64;
  o.scheduler.max_batch_size = 4;
  o.scheduler.max_num_active_requests = 4;
  o.scheduler.max_num_tokens = 128;
  o.scheduler.chunk_size = 2 * kTpb;  // the older request grows by two blocks a step
  o.scheduler.prefix_reuse = true;
  return o;
}

bool StepChecked(ScriptedCluster& c) {
  const bool ok = c.StepAll().ok();
  EXPECT_TRUE(ok) << "step " << c.steps();
  EXPECT_THAT(c.AuditAll(), IsEmpty()) << "step " << c.steps();
  return ok;
}

void RunToEnd(ScriptedCluster& c, RequestId id) {
  for (int i = 0; i < 500 && !c.stream(id).finished; ++i) {
    if (!StepChecked(c)) return;
  }
  EXPECT_TRUE(c.stream(id).finished) << "request " << id.value();
}

TEST(AggTierUsageTest, ARequestPausedWhileItsPrefixCameBackReportsThatPrefixAsCached) {
  ScriptedCluster c(AggCluster());
  // A prompt of 8 full blocks, then an unrelated one that evicts them to the host tier.
  exec::NewRequestSpec first = c.MakeRequest(1, 8 * kTpb + 1, 1, /*pinned_rank=*/0);
  const std::vector<int32_t> prompt = first.prompt;
  c.Submit(std::move(first));
  RunToEnd(c, RequestId(1));
  c.Submit(c.MakeRequest(2, 10 * kTpb, 1, /*pinned_rank=*/0));
  RunToEnd(c, RequestId(2));

  // An older request prefills two blocks a step; the repeated prompt arrives while its
  // chunk is in flight, so its prefix is copied back after that batch.
  c.Submit(c.MakeRequest(3, 10 * kTpb, 1, /*pinned_rank=*/0));
  ASSERT_TRUE(StepChecked(c));
  exec::NewRequestSpec again = c.MakeRequest(4, 8 * kTpb + 1, 1, /*pinned_rank=*/0);
  again.prompt = prompt;
  c.Submit(std::move(again));
  RunToEnd(c, RequestId(3));
  RunToEnd(c, RequestId(4));

  const exec::ExecutorCounters counters = c.rank(0).counters();
  const kv::ManagerStats kv = c.rank(0).kv().Stats();
  // The scenario happened: the repeated prompt was paused, and its prefix came back
  // from the host tier.
  ASSERT_GE(counters.paused, 1);
  ASSERT_GE(kv.tiers.onboarded_blocks[static_cast<int>(kv::Tier::kHost)], 1);
  const Stream s = c.stream(RequestId(4));
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.cached_prompt_tokens, 8 * kTpb);
}

}  // namespace
}  // namespace lockstep::testing
