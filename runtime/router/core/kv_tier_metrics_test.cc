#include "runtime/router/core/kv_tier_metrics.h"

#include <cmath>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "runtime/router/testing/prometheus_text.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;

// Rank 0 without tiers, rank 1 with a host and a disk tier: 16 tokens a block of 4 KiB.
v1::StatsResponse TwoRanks() {
  v1::StatsResponse stats;
  stats.set_kv_tokens_per_block(16);
  stats.set_kv_bytes_per_token(256);
  v1::RankStats* plain = stats.add_ranks();
  plain->set_rank(0);
  plain->set_prompt_tokens(1000);
  plain->set_prefix_tokens_reused(250);
  v1::RankStats* tiered = stats.add_ranks();
  tiered->set_rank(1);
  tiered->set_prompt_tokens(2000);
  tiered->set_prefix_tokens_reused(1200);  // 10 host + 5 disk blocks of it: 240 tokens
  v1::KvTierStats* t = tiered->mutable_tiers();
  t->set_block_bytes(4096);
  t->set_host_blocks(30);
  t->set_host_capacity_blocks(64);
  t->set_disk_blocks(100);
  t->set_disk_capacity_blocks(256);
  t->set_host_hit_blocks(10);
  t->set_disk_hit_blocks(5);
  t->set_offloaded_blocks(40);
  t->set_offload_micros(8000);
  t->set_onboard_micros(3000);
  t->set_disk_corrupt_blocks(2);
  t->set_stuck_jobs(1);
  t->set_pinned_blocks(3);
  t->set_served_blocks(9);
  return stats;
}

absl::StatusOr<testing::ParsedMetrics> Render(const v1::StatsResponse& stats) {
  MetricsRegistry registry;
  KvTierMetrics metrics(registry);
  metrics.Set("ctx0", stats);
  return testing::ParsePrometheusText(registry.RenderText());
}

TEST(KvTierMetricsTest, HitsSplitByTierAddUpToTheRanksReuse) {
  absl::StatusOr<testing::ParsedMetrics> m = Render(TwoRanks());
  ASSERT_THAT(m, IsOk());
  const auto at = [&](const char* name, const char* rank, const char* tier) {
    return m->Value(name, {{"instance", "ctx0"}, {"rank", rank}, {"tier", tier}});
  };
  EXPECT_EQ(m->types.at("lockstep_instance_kv_tier_hit_tokens_total"), "counter");
  EXPECT_EQ(at("lockstep_instance_kv_tier_hit_tokens_total", "1", "host"), 160);
  EXPECT_EQ(at("lockstep_instance_kv_tier_hit_tokens_total", "1", "disk"), 80);
  EXPECT_EQ(at("lockstep_instance_kv_tier_hit_tokens_total", "1", "device"), 1200 - 240);
  EXPECT_DOUBLE_EQ(at("lockstep_instance_kv_tier_hit_rate", "1", "host"), 160.0 / 2000);
  EXPECT_DOUBLE_EQ(at("lockstep_instance_kv_tier_hit_rate", "1", "device"), 960.0 / 2000);
  // Without tiers: the device series only.
  EXPECT_DOUBLE_EQ(at("lockstep_instance_kv_tier_hit_rate", "0", "device"), 0.25);
  EXPECT_TRUE(
      m->Find("lockstep_instance_kv_tier_hit_rate", {{"rank", "0"}, {"tier", "host"}}).empty());
  EXPECT_TRUE(m->Find("lockstep_instance_kv_tier_blocks", {{"rank", "0"}}).empty());
  EXPECT_TRUE(m->Find("lockstep_instance_kv_tier_offload_bytes_total", {{"rank", "0"}}).empty());
}

TEST(KvTierMetricsTest, ContentsCopiesAndBytesPerToken) {
  absl::StatusOr<testing::ParsedMetrics> m = Render(TwoRanks());
  ASSERT_THAT(m, IsOk());
  const std::map<std::string, std::string> rank1 = {{"instance", "ctx0"}, {"rank", "1"}};
  const auto tier = [&](const char* t) {
    std::map<std::string, std::string> labels = rank1;
    labels["tier"] = t;
    return labels;
  };
  EXPECT_EQ(m->Value("lockstep_instance_kv_bytes_per_token", {{"instance", "ctx0"}}), 256);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_blocks", tier("host")), 30);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_bytes", tier("disk")), 100 * 4096);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_capacity_bytes", tier("host")), 64 * 4096);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_onboarded_blocks_total", tier("disk")), 5);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_offload_bytes_total", rank1), 40 * 4096);
  EXPECT_DOUBLE_EQ(m->Value("lockstep_instance_kv_tier_offload_seconds_total", rank1), 0.008);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_onboard_bytes_total", rank1), 15 * 4096);
  EXPECT_DOUBLE_EQ(m->Value("lockstep_instance_kv_tier_onboard_bytes_per_second", rank1),
                   15 * 4096 / 0.003);
  EXPECT_DOUBLE_EQ(m->Value("lockstep_instance_kv_tier_offload_block_seconds", rank1), 0.008 / 40);
  EXPECT_DOUBLE_EQ(m->Value("lockstep_instance_kv_tier_onboard_block_seconds", rank1), 0.003 / 15);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_disk_corrupt_blocks_total", rank1), 2);
  EXPECT_EQ(m->types.at("lockstep_instance_kv_tier_stuck_jobs_total"), "counter");
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_stuck_jobs_total", rank1), 1);
  EXPECT_EQ(m->types.at("lockstep_instance_kv_tier_served_blocks_total"), "counter");
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_served_blocks_total", rank1), 9);
  EXPECT_EQ(m->types.at("lockstep_instance_kv_tier_pinned_blocks"), "gauge");
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_pinned_blocks", rank1), 3);
  EXPECT_TRUE(m->Find("lockstep_instance_kv_tier_served_blocks_total", {{"rank", "0"}}).empty());
}

TEST(KvTierMetricsTest, NoCopiesYetIsZeroNotNan) {
  v1::StatsResponse stats = TwoRanks();
  v1::KvTierStats* t = stats.mutable_ranks(1)->mutable_tiers();
  t->set_offloaded_blocks(0);
  t->set_offload_micros(0);
  t->set_host_hit_blocks(0);
  t->set_disk_hit_blocks(0);
  t->set_onboard_micros(0);
  absl::StatusOr<testing::ParsedMetrics> m = Render(stats);
  ASSERT_THAT(m, IsOk());
  const std::map<std::string, std::string> rank1 = {{"instance", "ctx0"}, {"rank", "1"}};
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_onboard_bytes_per_second", rank1), 0);
  EXPECT_EQ(m->Value("lockstep_instance_kv_tier_offload_block_seconds", rank1), 0);
}

TEST(KvTierMetricsTest, AWorkerWithoutItsKvShapeHasNoSeriesAndClearDropsThem) {
  MetricsRegistry registry;
  KvTierMetrics metrics(registry);
  v1::StatsResponse old = TwoRanks();
  old.clear_kv_tokens_per_block();
  metrics.Set("old0", old);
  metrics.Set("ctx0", TwoRanks());
  absl::StatusOr<testing::ParsedMetrics> m = testing::ParsePrometheusText(registry.RenderText());
  ASSERT_THAT(m, IsOk());
  EXPECT_TRUE(
      m->Find("lockstep_instance_kv_tier_hit_tokens_total", {{"instance", "old0"}}).empty());
  EXPECT_FALSE(
      m->Find("lockstep_instance_kv_tier_hit_tokens_total", {{"instance", "ctx0"}}).empty());
  metrics.Clear();
  m = testing::ParsePrometheusText(registry.RenderText());
  ASSERT_THAT(m, IsOk());
  EXPECT_TRUE(m->Find("lockstep_instance_kv_tier_hit_tokens_total").empty());
  EXPECT_TRUE(m->Find("lockstep_instance_kv_bytes_per_token").empty());
}

}  // namespace
}  // namespace lockstep::router
