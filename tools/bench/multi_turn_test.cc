#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/config/config_yaml.h"
#include "tools/bench/multi_turn.h"
#include "tools/bench/multi_turn_command.h"
#include "tools/bench/multi_turn_report.h"

namespace lockstep::bench {
namespace {

TEST(MultiTurnTest, IdealReuseIsFullBlocksOfTheCachedPartMinusTheLastToken) {
  EXPECT_EQ(IdealReusedTokens(100, 0, 16), 0);
  EXPECT_EQ(IdealReusedTokens(100, 70, 16), 64);
  EXPECT_EQ(IdealReusedTokens(65, 200, 16), 64);  // at most the prompt minus its last token
  EXPECT_EQ(IdealReusedTokens(64, 200, 16), 48);
  EXPECT_EQ(IdealReusedTokens(1, 200, 16), 0);
}

TEST(MultiTurnTest, PublishedTokensCountTheReplyOnlyWhereTheInstanceDecodes) {
  // Aggregated: the prompt and the reply up to history - 1 (the last token has no KV).
  EXPECT_EQ(PublishedTokens(100, 40, /*replies_published=*/true), 138);
  EXPECT_EQ(PublishedTokens(100, 2, true), 100);
  EXPECT_EQ(PublishedTokens(100, 1, true), 100);  // prefill only: the prompt
  // Disaggregated: the context instance prefills; the generation instance publishes
  // nothing that arrived by transfer.
  EXPECT_EQ(PublishedTokens(100, 40, /*replies_published=*/false), 100);
  // The next turn (prompt + reply + a 50-token message) reuses full blocks of that.
  EXPECT_EQ(IdealReusedTokens(190, PublishedTokens(100, 40, true), 16), 128);
  EXPECT_EQ(IdealReusedTokens(190, PublishedTokens(100, 40, false), 16), 96);
}

TEST(MultiTurnTest, ThinkTimesAreSeededBoundedAndLeaveThePromptsAlone) {
  MultiTurnOptions o;
  o.users = 8;
  o.seed = 7;
  const MultiTurnPlan at_once = MakeMultiTurnPlan(o);
  o.mean_think = absl::Milliseconds(500);
  const MultiTurnPlan thinking = MakeMultiTurnPlan(o);
  EXPECT_EQ(thinking.system, at_once.system) << "seed " << o.seed;
  ASSERT_EQ(thinking.users.size(), at_once.users.size());
  absl::Duration sum;
  int64_t pauses = 0;
  for (size_t u = 0; u < thinking.users.size(); ++u) {
    ASSERT_EQ(thinking.users[u].size(), at_once.users[u].size());
    for (size_t t = 0; t < thinking.users[u].size(); ++t) {
      const PlannedTurn& turn = thinking.users[u][t];
      EXPECT_EQ(turn.user, at_once.users[u][t].user) << "seed " << o.seed;
      EXPECT_EQ(turn.max_tokens, at_once.users[u][t].max_tokens);
      EXPECT_EQ(at_once.users[u][t].think, absl::ZeroDuration());
      if (t == 0) {
        EXPECT_EQ(turn.think, absl::ZeroDuration());  // a conversation starts at once
        continue;
      }
      EXPECT_GE(turn.think, absl::ZeroDuration());
      EXPECT_LE(turn.think, absl::Milliseconds(1000));
      sum += turn.think;
      ++pauses;
    }
  }
  ASSERT_GT(pauses, 20);
  // Uniform in [0, 1000] ms: the mean of 30-70 draws is well within 250-750 ms.
  EXPECT_GT(sum / pauses, absl::Milliseconds(250)) << "seed " << o.seed;
  EXPECT_LT(sum / pauses, absl::Milliseconds(750)) << "seed " << o.seed;
  const MultiTurnPlan again = MakeMultiTurnPlan(o);
  EXPECT_EQ(again.users[3][1].think, thinking.users[3][1].think);
}

TEST(MultiTurnTest, WorkerReuseIsEachRanksCountersOverTheRun) {
  const std::string prompt = kRankPromptTokens, reused = kRankReusedTokens;
  const std::map<std::string, double> before = {{prompt + "{instance=\"agg0\",rank=\"0\"}", 100},
                                                {reused + "{instance=\"agg0\",rank=\"0\"}", 10}};
  const std::map<std::string, double> after = {
      {prompt + "{instance=\"agg0\",rank=\"0\"}", 1100},
      {reused + "{instance=\"agg0\",rank=\"0\"}", 810},
      {prompt + "{instance=\"agg0\",rank=\"1\"}", 500},  // appeared during the run
      {prompt + "_other{instance=\"agg0\",rank=\"9\"}", 7},
      {"lockstep_router_prompt_tokens_total", 1500}};
  const std::vector<RankReuse> ranks = WorkerReuse(before, after);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].instance, "agg0");
  EXPECT_EQ(ranks[0].rank, "0");
  EXPECT_DOUBLE_EQ(ranks[0].prompt_tokens, 1000);
  EXPECT_DOUBLE_EQ(ranks[0].reused_tokens, 800);
  EXPECT_EQ(ranks[1].rank, "1");
  EXPECT_DOUBLE_EQ(ranks[1].prompt_tokens, 500);
  EXPECT_DOUBLE_EQ(ranks[1].reused_tokens, 0);
}

TEST(MultiTurnTest, TierHitsSumEveryRanksTierCountersOverTheRun) {
  const std::string hits = kTierHitTokens;
  const auto series = [&](const char* instance, const char* rank, const char* tier) {
    return hits + "{instance=\"" + instance + "\",rank=\"" + rank + "\",tier=\"" + tier + "\"}";
  };
  const std::map<std::string, double> before = {{series("a", "0", "device"), 50},
                                                {series("a", "0", "host"), 16}};
  const std::map<std::string, double> after = {
      {series("a", "0", "device"), 450},
      {series("a", "0", "host"), 176},
      {series("a", "1", "host"), 32},  // appeared during the run
      {series("b", "0", "disk"), 64},
      {hits + "_other{tier=\"host\"}", 9}};
  const std::map<std::string, double> tiers = TierHits(before, after);
  ASSERT_EQ(tiers.size(), 3u);
  EXPECT_DOUBLE_EQ(tiers.at("device"), 400);
  EXPECT_DOUBLE_EQ(tiers.at("host"), 160 + 32);
  EXPECT_DOUBLE_EQ(tiers.at("disk"), 64);
}

TEST(MultiTurnTest, ReportTakesHitRatesFromTheRouterAndTheIdealFromTheTurns) {
  MultiTurnOptions o;
  MultiTurnResult result;
  result.wall = absl::Seconds(2);
  for (int i = 0; i < 4; ++i) {
    TurnOutcome t;
    t.ok = true;
    t.prompt_tokens = 100;
    t.output_tokens = 10;
    t.ideal_reused_tokens = 80;
    t.cached_tokens = i < 3 ? 80 : 64;  // the last turn recomputed a block
    t.ttft = absl::Milliseconds(10 * (i + 1));
    result.turns.push_back(t);
  }
  TurnOutcome failed;
  failed.error = "gRPC 14: gone";
  result.turns.push_back(failed);
  const std::string paused = kPausedRequests;
  const std::map<std::string, double> before = {{"lockstep_router_prompt_tokens_total", 50},
                                                {"lockstep_router_prefix_cached_tokens_total", 5},
                                                {paused + "{instance=\"a\"}", 2}};
  const std::map<std::string, double> after = {
      {"lockstep_router_prompt_tokens_total", 450},
      {"lockstep_router_prefix_cached_tokens_total", 293},
      {"lockstep_router_routing_decisions_total{reason=\"prefix\"}", 3},
      {"lockstep_router_rank_hints_total{outcome=\"honoured\"}", 3},
      {std::string(kRankPromptTokens) + "{instance=\"a\",rank=\"0\"}", 300},
      {std::string(kRankReusedTokens) + "{instance=\"a\",rank=\"0\"}", 210},
      {std::string(kRankPromptTokens) + "{instance=\"a\",rank=\"1\"}", 100},
      {std::string(kRankReusedTokens) + "{instance=\"a\",rank=\"1\"}", 50},
      {std::string(kTierHitTokens) + "{instance=\"a\",rank=\"0\",tier=\"device\"}", 180},
      {std::string(kTierHitTokens) + "{instance=\"a\",rank=\"0\",tier=\"host\"}", 80},
      {paused + "{instance=\"a\"}", 7},
      {paused + "{instance=\"b\"}", 1},  // appeared during the run
      {paused + "_other{instance=\"a\"}", 50}};
  const nlohmann::json r = MakeMultiTurnReport(o, "kv_aware", result, before, after);
  EXPECT_EQ(r["requests"], 4);
  EXPECT_EQ(r["failed"], 1);
  EXPECT_DOUBLE_EQ(r["ideal_hit_rate"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(r["hit_rate"].get<double>(), 288.0 / 400.0);
  EXPECT_DOUBLE_EQ(r["hit_rate_vs_ideal"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(r["workers"]["hit_rate"].get<double>(), 260.0 / 400.0);
  EXPECT_DOUBLE_EQ(r["workers"]["hit_rate_vs_ideal"].get<double>(), 260.0 / 400.0 / 0.8);
  EXPECT_DOUBLE_EQ(r["workers"]["ranks"][1]["hit_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["ttft_ms"]["p50"].get<double>(), 20);
  EXPECT_EQ(r["responses"]["cached_tokens"], 3 * 80 + 64);
  EXPECT_DOUBLE_EQ(r["responses"]["hit_rate"].get<double>(), 304.0 / 400.0);
  EXPECT_EQ(r["ttft_ms_by_reuse"]["full"]["turns"], 3);
  EXPECT_DOUBLE_EQ(r["ttft_ms_by_reuse"]["full"]["p50"].get<double>(), 20);
  EXPECT_EQ(r["ttft_ms_by_reuse"]["partial"]["turns"], 1);
  EXPECT_DOUBLE_EQ(r["ttft_ms_by_reuse"]["partial"]["p50"].get<double>(), 40);
  EXPECT_DOUBLE_EQ(r["output_tokens_per_s"].get<double>(), 20);
  EXPECT_EQ(r["routing_decisions"]["prefix"], 3);
  EXPECT_EQ(r["rank_hints"]["overridden"], 0);
  EXPECT_DOUBLE_EQ(r["workers"]["tiers"]["device"]["reused_tokens"].get<double>(), 180);
  EXPECT_DOUBLE_EQ(r["workers"]["tiers"]["host"]["hit_rate"].get<double>(), 80.0 / 400.0);
  EXPECT_FALSE(r["workers"]["tiers"].contains("disk"));
  EXPECT_NE(FormatMultiTurnReport(r).find("host 20.0% (80 tokens)"), std::string::npos);
  EXPECT_DOUBLE_EQ(r["paused_requests"].get<double>(), 5 + 1);
  EXPECT_NE(FormatMultiTurnReport(r).find("; 6 paused to make room"), std::string::npos);

  nlohmann::json baseline = r;
  baseline["policy"] = "least_load";
  baseline["ttft_ms"]["p50"] = 50.0;
  const nlohmann::json c = CompareMultiTurn(baseline, r);
  EXPECT_DOUBLE_EQ(c["ttft_p50_speedup"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(c["workers_hit_rate"]["candidate"].get<double>(), 260.0 / 400.0);
  EXPECT_NE(FormatComparison(c).find("kv_aware vs least_load"), std::string::npos);
}

TEST(MultiTurnTest, ConfigWithPolicySetsThePolicyAndAbsoluteModelPaths) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string path = dir + "/deployment.yaml";
  std::ofstream(path) << "model: {name: m, path: models/m}\n"
                         "router: {policy: round_robin}\n"
                         "instances: [{name: a, role: aggregated}]\n";
  absl::StatusOr<std::string> yaml = ConfigWithPolicy(path, "kv_aware");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  absl::StatusOr<config::DeploymentConfig> parsed =
      config::ParseDeploymentConfig(*yaml, "/elsewhere");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->router.policy, config::RoutingPolicy::kKvAware);
  EXPECT_EQ(parsed->model.path, dir + "/models/m");
  const absl::StatusOr<std::string> bad = ConfigWithPolicy(path, "fastest");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fastest"), absl::string_view::npos);
}

}  // namespace
}  // namespace lockstep::bench
