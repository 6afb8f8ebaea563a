// The figures of a multi-turn run: the client's turns (TTFT, throughput, the ideal
// prefix reuse), the router's routing counters over the run (its view of the prefix
// hit rate: cached prompt tokens on the serving rank over prompt tokens, from its index
// at routing time) and the workers' own reuse counters (the tokens their new caches
// really reused, in all and by KV tier), as JSON and text; and the comparison of two runs of the same workload
// under two policies.
#ifndef LOCKSTEP_TOOLS_BENCH_MULTI_TURN_REPORT_H_
#define LOCKSTEP_TOOLS_BENCH_MULTI_TURN_REPORT_H_

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/bench/multi_turn.h"

namespace lockstep::bench {

inline constexpr char kRankPromptTokens[] = "lockstep_instance_rank_prompt_tokens_total";
inline constexpr char kRankReusedTokens[] = "lockstep_instance_rank_prefix_tokens_reused_total";
inline constexpr char kTierHitTokens[] = "lockstep_instance_kv_tier_hit_tokens_total";
inline constexpr char kPausedRequests[] = "lockstep_instance_paused_requests_total";

// One rank's prefix reuse over a run, from its Stats as the router mirrors them: the
// tokens its new context caches had to prefill, and how many of them it reused.
struct RankReuse {
  std::string instance;
  std::string rank;
  double prompt_tokens = 0;
  double reused_tokens = 0;
};

// Every rank's counters in `after` less those in `before`, by instance then rank.
std::vector<RankReuse> WorkerReuse(const std::map<std::string, double>& before,
                                   const std::map<std::string, double>& after);

// Prompt tokens the workers reused over a run by the KV tier they were found in (device,
// host, disk; router/core/kv_tier_metrics.h), summed over every instance and rank. Tiers
// no rank reported are absent.
std::map<std::string, double> TierHits(const std::map<std::string, double>& before,
                                       const std::map<std::string, double>& after);

// `after` / `before`: ParseSamples of the router's /metrics around the run.
nlohmann::json MakeMultiTurnReport(const MultiTurnOptions& options, const std::string& policy,
                                   const MultiTurnResult& result,
                                   const std::map<std::string, double>& before,
                                   const std::map<std::string, double>& after);
std::string FormatMultiTurnReport(const nlohmann::json& report);

// `candidate` against `baseline`: hit rates, TTFT p50 / p99 and throughput side by side
// with their ratios.
nlohmann::json CompareMultiTurn(const nlohmann::json& baseline, const nlohmann::json& candidate);
std::string FormatComparison(const nlohmann::json& comparison);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_MULTI_TURN_REPORT_H_
