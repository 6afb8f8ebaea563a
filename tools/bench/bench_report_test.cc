#include "tools/bench/bench_report.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/bench/load_generator.h"

namespace lockstep::bench {
namespace {

TEST(BenchReportTest, Percentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const Percentiles p = Compute(v);
  EXPECT_EQ(p.p50, 50);
  EXPECT_EQ(p.p99, 99);
  EXPECT_EQ(Compute({}).p50, 0);
  EXPECT_EQ(Compute({7}).p99, 7);
}

TEST(BenchReportTest, ReportHasTheRequiredKeysAndCounts) {
  LoadOptions options;
  options.concurrency = 4;
  LoadResult result;
  result.wall = absl::Seconds(2);
  RequestOutcome ok;
  ok.ok = true;
  ok.output_tokens = 11;
  ok.prompt_tokens = 5;
  ok.ttft = absl::Milliseconds(100);
  ok.latency = absl::Milliseconds(600);  // 10 more tokens in 500 ms: 50 ms per token
  RequestOutcome bad;
  bad.error = "HTTP 503";
  result.outcomes = {ok, ok, bad};
  InstanceDelta gen;
  gen.name = "gen0";
  gen.role = "generation";
  gen.steps = 1000;
  gen.vetoed_steps = 5;
  gen.drafts_proposed = 30;
  gen.drafts_accepted = 12;
  const nlohmann::json r = MakeReport(options, result, {gen});
  EXPECT_EQ(r["requests"], 3);
  EXPECT_EQ(r["completed"], 2);
  EXPECT_EQ(r["failed"], 1);
  EXPECT_DOUBLE_EQ(r["output_tokens_per_s"].get<double>(), 11.0);
  EXPECT_DOUBLE_EQ(r["ttft_ms"]["p50"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(r["tpot_ms"]["p99"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(r["draft_acceptance"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(r["instances"][0]["vetoed_per_1000_steps"].get<double>(), 5.0);
  const std::string text = FormatReport(r);
  EXPECT_THAT(text, ::testing::HasSubstr("completed 2, failed 1"));
  EXPECT_THAT(text, ::testing::HasSubstr("error: HTTP 503"));
}

TEST(BenchReportTest, TokensPerStepAndSpeculationPerInstance) {
  LoadOptions options;
  options.workload = LoadOptions::Workload::kRepetitive;
  LoadResult result;
  result.wall = absl::Seconds(1);
  InstanceDelta agg;
  agg.name = "agg0";
  agg.role = "aggregated";
  agg.steps = 20;  // two sequences in every step
  agg.generated_tokens = 100;
  agg.drafts_proposed = 80;
  agg.drafts_accepted = 60;
  agg.speculative = "ngram K=4 dynamic";
  const nlohmann::json r = MakeReport(options, result, {agg});
  EXPECT_EQ(r["workload"], "repetitive");
  EXPECT_DOUBLE_EQ(r["instances"][0]["tokens_per_step"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(r["instances"][0]["draft_acceptance"].get<double>(), 0.75);
  // 100 tokens from 40 sequence steps: 60 accepted drafts plus one token per step.
  EXPECT_DOUBLE_EQ(r["instances"][0]["tokens_per_sequence_step"].get<double>(), 2.5);
  EXPECT_THAT(FormatReport(r),
              ::testing::HasSubstr("5.000 tokens per step (2.500 per sequence step); drafts "
                                   "(ngram K=4 dynamic) 60 of 80"));
}

TEST(BenchReportTest, DraftsByMethodKStepsAndPerRequestAcceptance) {
  LoadOptions options;
  LoadResult result;
  result.wall = absl::Seconds(1);
  InstanceDelta a;
  a.name = "agg0";
  a.role = "aggregated";
  a.drafts_proposed = 80;
  a.drafts_accepted = 60;
  a.drafts_by_method["ngram"] = {80, 60};
  a.draft_k_steps = {10, 0, 10, 0, 20};  // mean K (0*10 + 2*10 + 4*20) / 40 = 2.5
  InstanceDelta b;
  b.name = "agg1";
  b.role = "aggregated";
  b.drafts_by_method["ngram"] = {20, 10};
  b.draft_k_steps = {0, 0, 0, 0, 10};
  InstanceDelta plain;
  plain.name = "agg2";
  plain.role = "aggregated";
  plain.draft_k_steps = {30};
  // Requests by their current K, sampled during the run (b was never sampled).
  a.draft_k_request_samples = 12;
  a.mean_draft_k_requests = {0.5, 0, 1.5, 0, 4};
  plain.draft_k_request_samples = 10;
  plain.mean_draft_k_requests = {3};
  std::map<std::string, RequestDrafts> per_request;
  per_request["ngram"] = {8, 6.0};
  const nlohmann::json r = MakeReport(options, result, {a, b, plain}, per_request);
  const nlohmann::json& i0 = r["instances"][0];
  EXPECT_EQ(i0["drafts_by_method"]["ngram"]["proposed"], 80);
  EXPECT_DOUBLE_EQ(i0["drafts_by_method"]["ngram"]["acceptance"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(i0["mean_k"].get<double>(), 2.5);
  EXPECT_TRUE(r["instances"][2]["drafts_by_method"].empty());
  // Summed over instances: 100 proposed, 70 accepted; steps by K add up.
  EXPECT_EQ(r["drafts_by_method"]["ngram"]["proposed"], 100);
  EXPECT_EQ(r["drafts_by_method"]["ngram"]["accepted"], 70);
  EXPECT_EQ(r["draft_k_steps"], nlohmann::json({40, 0, 10, 0, 30}));
  EXPECT_EQ(i0["draft_k_requests"]["samples"], 12);
  EXPECT_EQ(i0["draft_k_requests"]["mean"], nlohmann::json({0.5, 0, 1.5, 0, 4}));
  EXPECT_FALSE(r["instances"][1].contains("draft_k_requests"));
  // Summed over the sampled instances; the fewest samples any of them had.
  EXPECT_EQ(r["draft_k_requests"]["mean"], nlohmann::json({3.5, 0, 1.5, 0, 4}));
  EXPECT_EQ(r["draft_k_requests"]["samples"], 10);
  EXPECT_EQ(r["request_drafts"]["ngram"]["requests"], 8);
  EXPECT_DOUBLE_EQ(r["request_drafts"]["ngram"]["mean_acceptance"].get<double>(), 0.75);
  const std::string text = FormatReport(r);
  EXPECT_THAT(text, ::testing::HasSubstr("K per sequence step 0:10 2:10 4:20 (mean 2.50)"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "ngram        70 of 100 accepted (70.0%); per request 75.0% mean over 8 "
                        "requests"));
  EXPECT_THAT(text, ::testing::HasSubstr("K steps      0:40 2:10 4:30 (mean 1.75)"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("requests by current K 0:0.5 2:1.5 4:4.0 (mean of 12 samples)"));
  EXPECT_THAT(text, ::testing::HasSubstr("K requests   0:3.5 2:1.5 4:4.0 (mean of 10 samples)"));
}

// Acceptance by draft position and the mean accepted length, per instance and summed
// over instances; an instance that verified no draft has none.
TEST(BenchReportTest, AcceptanceByPositionAndMeanAcceptedLength) {
  LoadOptions options;
  LoadResult result;
  result.wall = absl::Seconds(1);
  InstanceDelta a;
  a.name = "gen0";
  a.role = "generation";
  a.drafts_by_method["mtp"] = {280, 125};
  a.draft_position_proposed = {100, 100, 80};
  a.draft_position_accepted = {65, 40, 20};  // 1 + 125 / 100 = 2.25
  InstanceDelta b = a;
  b.name = "gen1";
  b.draft_position_proposed = {100, 100, 100};
  b.draft_position_accepted = {75, 40, 20};
  InstanceDelta plain;
  plain.name = "gen2";
  plain.role = "generation";
  const nlohmann::json r = MakeReport(options, result, {a, b, plain});
  const nlohmann::json& i0 = r["instances"][0];
  EXPECT_DOUBLE_EQ(i0["draft_positions"]["acceptance"][0].get<double>(), 0.65);
  EXPECT_DOUBLE_EQ(i0["draft_positions"]["acceptance"][2].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(i0["draft_positions"]["mean_accepted_length"].get<double>(), 2.25);
  EXPECT_TRUE(r["instances"][2]["draft_positions"].empty());
  EXPECT_DOUBLE_EQ(r["draft_positions"]["acceptance"][0].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(r["draft_positions"]["acceptance"][2].get<double>(), 40.0 / 180);
  EXPECT_DOUBLE_EQ(r["draft_positions"]["mean_accepted_length"].get<double>(), 2.3);
  const std::string text = FormatReport(r);
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "acceptance by position 1:65.0% 2:40.0% 3:25.0% (mean accepted length "
                        "2.25)"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "by position  1:70.0% 2:40.0% 3:22.2% (mean accepted length 2.30)"));
}

TEST(BenchReportTest, WorkloadNames) {
  EXPECT_EQ(*ParseWorkload("repetitive"), LoadOptions::Workload::kRepetitive);
  EXPECT_EQ(*ParseWorkload("default"), LoadOptions::Workload::kDefault);
  EXPECT_FALSE(ParseWorkload("chatty").ok());
  EXPECT_STREQ(WorkloadName(LoadOptions::Workload::kRepetitive), "repetitive");
}

}  // namespace
}  // namespace lockstep::bench
