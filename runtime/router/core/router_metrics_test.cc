#include "runtime/router/core/router_metrics.h"

#include <map>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/router/testing/prometheus_text.h"

namespace lockstep::router {
namespace {

using ::lockstep::testing::IsOk;
using ::testing::HasSubstr;

// The executor's step counters, as the leader's Stats reports them, become one counter
// series per instance; the stale-update series counts only real requests' updates.
TEST(RouterMetricsTest, MirrorsTheStepCountersOfEveryInstance) {
  InstanceState instance;
  instance.name = "gen0";
  instance.has_stats = true;
  instance.stats.set_steps(100);
  instance.stats.set_stale_updates(2);
  instance.stats.set_dummy_updates_dropped(40);
  instance.stats.set_rank_errors(3);
  instance.stats.set_error_steps(1);
  instance.stats.set_engine_failures(1);
  instance.stats.set_paused_requests(6);
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({instance}));
  ASSERT_THAT(parsed, IsOk());
  const std::map<std::string, std::string> gen0 = {{"instance", "gen0"}};
  EXPECT_EQ(parsed->Value("lockstep_instance_steps_total", gen0), 100);
  EXPECT_EQ(parsed->Value("lockstep_instance_stale_updates_total", gen0), 2);
  EXPECT_EQ(parsed->Value("lockstep_instance_dummy_updates_dropped_total", gen0), 40);
  EXPECT_EQ(parsed->Value("lockstep_instance_rank_errors_total", gen0), 3);
  EXPECT_EQ(parsed->Value("lockstep_instance_error_steps_total", gen0), 1);
  EXPECT_EQ(parsed->Value("lockstep_instance_engine_failures_total", gen0), 1);
  EXPECT_EQ(parsed->Value("lockstep_instance_paused_requests_total", gen0), 6);
  EXPECT_EQ(parsed->types.at("lockstep_instance_rank_errors_total"), "counter");
  EXPECT_THAT(parsed->help.at("lockstep_instance_stale_updates_total"),
              HasSubstr("closed or re-created"));
}

// An instance's drafts are labelled by the method that proposed them, its generation
// steps and its generation requests by K; an instance without speculation has no draft
// series.
TEST(RouterMetricsTest, InstanceDraftsByMethodAndStepsByK) {
  InstanceState ngram;
  ngram.name = "agg0";
  ngram.has_stats = true;
  v1::DraftTokens* drafts = ngram.stats.add_drafts_by_method();
  drafts->set_method("ngram");
  drafts->set_proposed(90);
  drafts->set_accepted(60);
  for (int64_t steps : {4, 0, 7, 20}) ngram.stats.add_draft_k_steps(steps);
  for (int64_t requests : {1, 0, 0, 5}) ngram.stats.add_draft_k_requests(requests);
  InstanceState plain;
  plain.name = "agg1";
  plain.has_stats = true;
  plain.stats.add_draft_k_steps(30);
  plain.stats.add_draft_k_requests(2);
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({ngram, plain}));
  ASSERT_THAT(parsed, IsOk());
  const std::map<std::string, std::string> agg0_ngram = {{"instance", "agg0"},
                                                         {"method", "ngram"}};
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_tokens_proposed_total", agg0_ngram), 90);
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_tokens_accepted_total", agg0_ngram), 60);
  EXPECT_THAT(parsed->Find("lockstep_instance_draft_tokens_proposed_total", {{"instance", "agg1"}}),
              ::testing::IsEmpty());
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_k_steps_total", {{"instance", "agg0"}, {"k", "2"}}),
            7);
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_k_steps_total", {{"instance", "agg0"}, {"k", "3"}}),
            20);
  EXPECT_EQ(parsed->Find("lockstep_instance_draft_k_steps_total", {{"instance", "agg0"}}).size(), 4u);
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_k_steps_total", {{"instance", "agg1"}, {"k", "0"}}),
            30);
  EXPECT_EQ(parsed->types.at("lockstep_instance_draft_k_steps_total"), "counter");
  const std::string requests = "lockstep_instance_draft_k_requests";
  EXPECT_EQ(parsed->Value(requests, {{"instance", "agg0"}, {"k", "0"}}), 1);
  EXPECT_EQ(parsed->Value(requests, {{"instance", "agg0"}, {"k", "1"}}), 0);
  EXPECT_EQ(parsed->Value(requests, {{"instance", "agg0"}, {"k", "3"}}), 5);
  EXPECT_EQ(parsed->Find(requests, {{"instance", "agg0"}}).size(), 4u);
  EXPECT_EQ(parsed->Value(requests, {{"instance", "agg1"}, {"k", "0"}}), 2);
  EXPECT_EQ(parsed->types.at(requests), "gauge");
  // The gauge follows the last poll: a K that no longer reports is gone.
  ngram.stats.clear_draft_k_requests();
  ngram.stats.add_draft_k_requests(6);
  parsed = testing::ParsePrometheusText(metrics.Render({ngram, plain}));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->Value(requests, {{"instance", "agg0"}, {"k", "0"}}), 6);
  EXPECT_THAT(parsed->Find(requests, {{"instance", "agg0"}, {"k", "3"}}), ::testing::IsEmpty());
}

// Acceptance by draft position (counters and their ratio) and the mean accepted length
// (1 plus the accepted drafts per verifying step); none for an instance that verified no
// draft yet.
TEST(RouterMetricsTest, InstanceAcceptanceByPositionAndMeanAcceptedLength) {
  InstanceState mtp;
  mtp.name = "gen0";
  mtp.has_stats = true;
  for (int64_t proposed : {100, 100, 80}) mtp.stats.add_draft_position_proposed(proposed);
  for (int64_t accepted : {65, 40, 20}) mtp.stats.add_draft_position_accepted(accepted);
  InstanceState plain;
  plain.name = "gen1";
  plain.has_stats = true;
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({mtp, plain}));
  ASSERT_THAT(parsed, IsOk());
  auto at = [](const char* position) {
    return std::map<std::string, std::string>{{"instance", "gen0"}, {"position", position}};
  };
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_position_proposed_total", at("3")), 80);
  EXPECT_EQ(parsed->Value("lockstep_instance_draft_position_accepted_total", at("2")), 40);
  EXPECT_EQ(parsed->types.at("lockstep_instance_draft_position_accepted_total"), "counter");
  EXPECT_DOUBLE_EQ(parsed->Value("lockstep_instance_draft_position_acceptance", at("1")), 0.65);
  EXPECT_DOUBLE_EQ(parsed->Value("lockstep_instance_draft_position_acceptance", at("3")), 0.25);
  EXPECT_EQ(parsed->Find("lockstep_instance_draft_position_acceptance", {{"instance", "gen0"}}).size(),
            3u);
  EXPECT_DOUBLE_EQ(
      parsed->Value("lockstep_instance_draft_mean_accepted_length", {{"instance", "gen0"}}), 2.25);
  EXPECT_THAT(parsed->Find("lockstep_instance_draft_mean_accepted_length", {{"instance", "gen1"}}),
              ::testing::IsEmpty());
  EXPECT_THAT(parsed->Find("lockstep_instance_draft_position_proposed_total", {{"instance", "gen1"}}),
              ::testing::IsEmpty());
}

// Per rank: prefix reuse (prompt and reused tokens, counters) and tokens in flight; per
// instance: the imbalance of the tokens in flight. None before an instance reports ranks.
TEST(RouterMetricsTest, PrefixReuseAndLoadPerRank) {
  InstanceState instance;
  instance.name = "agg0";
  instance.has_stats = true;
  for (int r = 0; r < 2; ++r) {
    v1::RankStats* rank = instance.stats.add_ranks();
    rank->set_rank(r);
    rank->set_active_tokens(r == 0 ? 300 : 100);
    rank->set_prompt_tokens(r == 0 ? 1000 : 400);
    rank->set_prefix_tokens_reused(r == 0 ? 900 : 0);
  }
  instance.stats.set_active_token_imbalance(1.5);
  InstanceState quiet;
  quiet.name = "agg1";
  quiet.has_stats = true;
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({instance, quiet}));
  ASSERT_THAT(parsed, IsOk());
  const std::map<std::string, std::string> r0 = {{"instance", "agg0"}, {"rank", "0"}};
  const std::map<std::string, std::string> r1 = {{"instance", "agg0"}, {"rank", "1"}};
  EXPECT_EQ(parsed->Value("lockstep_instance_rank_prompt_tokens_total", r0), 1000);
  EXPECT_EQ(parsed->Value("lockstep_instance_rank_prefix_tokens_reused_total", r0), 900);
  EXPECT_EQ(parsed->Value("lockstep_instance_rank_prefix_tokens_reused_total", r1), 0);
  EXPECT_EQ(parsed->Value("lockstep_instance_rank_active_tokens", r1), 100);
  EXPECT_EQ(parsed->Value("lockstep_instance_active_token_imbalance", {{"instance", "agg0"}}), 1.5);
  EXPECT_EQ(parsed->types.at("lockstep_instance_rank_prefix_tokens_reused_total"), "counter");
  EXPECT_EQ(parsed->types.at("lockstep_instance_active_token_imbalance"), "gauge");
  EXPECT_THAT(parsed->Find("lockstep_instance_active_token_imbalance", {{"instance", "agg1"}}),
              ::testing::IsEmpty());
}

// The last expert-load window: per MoE layer every rank's load and the layer's max/mean;
// a layer without records (dense) has no series.
TEST(RouterMetricsTest, ExpertLoadPerLayerAndRank) {
  InstanceState instance;
  instance.name = "dep4";
  instance.has_stats = true;
  v1::ExpertLoadStats* loads = instance.stats.mutable_expert_load();
  loads->set_windows(2);
  loads->set_num_experts(4);
  loads->set_num_ranks(2);
  v1::ExpertLayerLoad* dense = loads->add_layers();
  dense->add_computed(0);
  dense->add_computed(0);
  dense->set_rank_imbalance(1);
  v1::ExpertLayerLoad* moe = loads->add_layers();
  moe->add_computed(30);
  moe->add_computed(10);
  moe->set_rank_imbalance(1.5);
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({instance}));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->Value("lockstep_instance_expert_load",
                          {{"instance", "dep4"}, {"layer", "1"}, {"rank", "0"}}),
            30);
  EXPECT_EQ(parsed->Value("lockstep_instance_expert_load",
                          {{"instance", "dep4"}, {"layer", "1"}, {"rank", "1"}}),
            10);
  EXPECT_EQ(parsed->Value("lockstep_instance_expert_load_imbalance",
                          {{"instance", "dep4"}, {"layer", "1"}}),
            1.5);
  EXPECT_EQ(parsed->types.at("lockstep_instance_expert_load_imbalance"), "gauge");
  EXPECT_THAT(parsed->Find("lockstep_instance_expert_load_imbalance",
                           {{"instance", "dep4"}, {"layer", "0"}}),
              ::testing::IsEmpty());
}

// Each finished request that proposed drafts adds them to its method's counters and
// its acceptance rate to the per-request histogram.
TEST(RouterMetricsTest, RequestDraftsByMethodAndTheirAcceptanceRate) {
  RouterMetrics metrics;
  auto finished = [&](const std::string& method, int64_t proposed, int64_t accepted) {
    v1::DraftTokens drafts;
    drafts.set_method(method);
    drafts.set_proposed(proposed);
    drafts.set_accepted(accepted);
    metrics.RequestDrafts(drafts);
  };
  finished("ngram", 10, 10);
  finished("ngram", 20, 5);
  finished("draft_model", 8, 2);
  finished("ngram", 0, 0);  // proposed nothing: not a sample
  absl::StatusOr<testing::ParsedMetrics> parsed = testing::ParsePrometheusText(metrics.Render({}));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(testing::CheckHistograms(*parsed), IsOk());
  EXPECT_EQ(parsed->Value("lockstep_router_draft_tokens_proposed_total", {{"method", "ngram"}}), 30);
  EXPECT_EQ(parsed->Value("lockstep_router_draft_tokens_accepted_total", {{"method", "ngram"}}), 15);
  EXPECT_EQ(
      parsed->Value("lockstep_router_draft_tokens_accepted_total", {{"method", "draft_model"}}), 2);
  const std::string hist = "lockstep_router_request_draft_acceptance";
  EXPECT_EQ(parsed->Value(hist + "_count", {{"method", "ngram"}}), 2);
  EXPECT_DOUBLE_EQ(parsed->Value(hist + "_sum", {{"method", "ngram"}}), 1.25);
  EXPECT_EQ(parsed->Value(hist + "_bucket", {{"method", "ngram"}, {"le", "0.3"}}), 1);
  EXPECT_EQ(parsed->Value(hist + "_bucket", {{"method", "ngram"}, {"le", "0.99"}}), 1);
  EXPECT_EQ(parsed->Value(hist + "_bucket", {{"method", "ngram"}, {"le", "1"}}), 2);
  EXPECT_EQ(parsed->Value(hist + "_count", {{"method", "draft_model"}}), 1);
}

// The KV tier series (kv_tier_metrics.h) come with every render, from the instances'
// last Stats.
TEST(RouterMetricsTest, KvBytesPerTokenAndTierHitsPerRank) {
  InstanceState instance;
  instance.name = "ctx0";
  instance.has_stats = true;
  instance.stats.set_kv_tokens_per_block(16);
  instance.stats.set_kv_bytes_per_token(70272);
  v1::RankStats* rank = instance.stats.add_ranks();
  rank->set_prompt_tokens(400);
  rank->set_prefix_tokens_reused(100);
  rank->mutable_tiers()->set_host_capacity_blocks(8);
  rank->mutable_tiers()->set_host_hit_blocks(2);
  RouterMetrics metrics;
  absl::StatusOr<testing::ParsedMetrics> parsed =
      testing::ParsePrometheusText(metrics.Render({instance}));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_EQ(parsed->Value("lockstep_instance_kv_bytes_per_token", {{"instance", "ctx0"}}), 70272);
  EXPECT_EQ(parsed->Value("lockstep_instance_kv_tier_hit_tokens_total",
                          {{"instance", "ctx0"}, {"rank", "0"}, {"tier", "host"}}),
            32);
  // A later render without the instance drops its series.
  parsed = testing::ParsePrometheusText(metrics.Render({}));
  ASSERT_THAT(parsed, IsOk());
  EXPECT_THAT(parsed->Find("lockstep_instance_kv_bytes_per_token"), ::testing::IsEmpty());
}

}  // namespace
}  // namespace lockstep::router
