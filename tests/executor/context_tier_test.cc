// A context instance of a disaggregated deployment serves a prefix hit from its host KV
// tier: a prompt whose blocks the device pool evicted is brought back from the host
// tier before its prefill, the context leg hands off KV for the whole prompt with the
// brought-back prefix counted as cached, and every block and claim is released after.
// Without a tier the same request recomputes its prefix.
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/executor/cluster.h"

namespace lockstep::testing {
namespace {

using ::testing::IsEmpty;

constexpr int kTpb = 4;

ClusterOptions ContextCluster(int32_t host_tier_blocks) {
  ClusterOptions o;
  o.ranks = 2;
  o.role = sched::InstanceRole::kContext;
  o.tokens_per_block = kTpb;
  o.num_blocks = 16;
  o.host_tier_blocks = host_tier_blocks;
  o.scheduler.max_batch_size = 4;
  o.scheduler.max_num_active_requests = 4;
  o.scheduler.max_num_tokens = 128;
  o.scheduler.prefix_reuse = true;
  return o;
}

// Runs one context leg on rank 0 to its hand-off, then until its claim is released (no
// generation instance pulls: its lease expires). `pinned`, when given, gets rank 0's
// host tier pins at the hand-off.
Stream RunLeg(ScriptedCluster& c, exec::NewRequestSpec spec, int64_t* pinned = nullptr) {
  const RequestId id = spec.id;
  c.Submit(std::move(spec));
  const auto ended = [&] {
    const Stream s = c.stream(id);
    return s.finished || s.context.has_value();
  };
  for (int i = 0; i < 500 && !ended(); ++i) {
    EXPECT_TRUE(c.StepAll().ok()) << "step " << c.steps();
    EXPECT_THAT(c.AuditAll(), IsEmpty()) << "step " << c.steps();
  }
  EXPECT_TRUE(ended()) << "request " << id.value();
  if (pinned != nullptr) *pinned = c.rank(0).kv().Stats().tiers.pinned_blocks;
  const auto released = [&] {
    return c.rank(0).LiveIds().empty() && c.rank(0).ClaimedIds().empty();
  };
  EXPECT_TRUE(c.StepUntil(released, 500)) << "request " << id.value();
  EXPECT_THAT(c.AuditAll(), IsEmpty());
  return c.stream(id);
}

struct Outcome {
  Stream again;  // the repeated prompt's leg
  int64_t pinned_at_handoff = 0;
  kv::ManagerStats kv;
};

// A prompt of 8 full blocks, an unrelated one that makes the device pool evict most of
// them, then the first prompt again.
Outcome RepeatAfterEviction(int32_t host_tier_blocks) {
  ScriptedCluster c(ContextCluster(host_tier_blocks));
  exec::NewRequestSpec first = c.MakeRequest(1, 8 * kTpb + 1, 4, /*pinned_rank=*/0);
  const std::vector<int32_t> prompt = first.prompt;
  const Stream s1 = RunLeg(c, std::move(first));
  EXPECT_TRUE(s1.context.has_value());
  const Stream s2 = RunLeg(c, c.MakeRequest(2, 12 * kTpb, 4, /*pinned_rank=*/0));
  EXPECT_TRUE(s2.context.has_value()) << s2.status << " finished " << s2.finished;
  exec::NewRequestSpec again = c.MakeRequest(3, 8 * kTpb + 1, 4, /*pinned_rank=*/0);
  again.prompt = prompt;
  Outcome out;
  out.again = RunLeg(c, std::move(again), &out.pinned_at_handoff);
  out.kv = c.rank(0).kv().Stats();
  EXPECT_EQ(out.kv.target.used_blocks, 0);
  EXPECT_EQ(out.kv.target.num_caches, 0);
  return out;
}

TEST(ContextTierTest, AContextLegServesAPrefixHitFromTheHostTier) {
  const Outcome tiered = RepeatAfterEviction(/*host_tier_blocks=*/64);
  ASSERT_TRUE(tiered.again.context.has_value());
  EXPECT_FALSE(tiered.again.finished);  // handed off, not answered here
  // The whole prefix (all but the last token's block) is cached: what the device pool
  // kept plus what came back from the host tier.
  EXPECT_EQ(tiered.again.cached_prompt_tokens, 8 * kTpb);
  const int64_t from_host = tiered.kv.tiers.onboarded_blocks[static_cast<int>(kv::Tier::kHost)];
  EXPECT_GE(from_host, 4);  // the device pool kept the rest
  EXPECT_EQ(tiered.kv.onboarded_tokens, from_host * kTpb);
  // Its claim named the host tier's copies of the prefix (kvcache/tier_pins.h); the
  // expired claim released them (the audit balanced the pins every step).
  EXPECT_GE(tiered.pinned_at_handoff, from_host);
  EXPECT_EQ(tiered.kv.tiers.pinned_blocks, 0);
  EXPECT_EQ(tiered.kv.tiers.served_blocks, 0);  // nobody pulled

  const Outcome untiered = RepeatAfterEviction(/*host_tier_blocks=*/0);
  ASSERT_TRUE(untiered.again.context.has_value());
  EXPECT_EQ(untiered.again.cached_prompt_tokens, 8 * kTpb - from_host * kTpb);
  EXPECT_EQ(untiered.kv.onboarded_tokens, 0);
}

}  // namespace
}  // namespace lockstep::testing
