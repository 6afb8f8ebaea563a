#include "tools/bench/multi_turn_report.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/metrics_text.h"

namespace lockstep::bench {
namespace {

using nlohmann::json;

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// The value of label `name` in a series' {...}; empty when it has none.
std::string LabelValue(absl::string_view series, absl::string_view name) {
  for (const char open : {'{', ','}) {
    const std::string key = absl::StrCat(std::string(1, open), name, "=\"");
    const size_t at = series.find(key);
    if (at == absl::string_view::npos) continue;
    const size_t begin = at + key.size();
    const size_t end = series.find('"', begin);
    if (end != absl::string_view::npos) return std::string(series.substr(begin, end - begin));
  }
  return "";
}

}  // namespace

std::vector<RankReuse> WorkerReuse(const std::map<std::string, double>& before,
                                   const std::map<std::string, double>& after) {
  const absl::string_view prompt_name = kRankPromptTokens;
  std::vector<RankReuse> out;
  for (const auto& [series, value] : after) {
    if (!IsLabelledSeriesOf(series, prompt_name)) continue;
    const std::string labels = series.substr(prompt_name.size());
    RankReuse rank;
    rank.instance = LabelValue(labels, "instance");
    rank.rank = LabelValue(labels, "rank");
    rank.prompt_tokens = Delta(after, before, series);
    rank.reused_tokens = Delta(after, before, absl::StrCat(kRankReusedTokens, labels));
    out.push_back(std::move(rank));
  }
  return out;
}

std::map<std::string, double> TierHits(const std::map<std::string, double>& before,
                                       const std::map<std::string, double>& after) {
  const absl::string_view name = kTierHitTokens;
  std::map<std::string, double> out;
  for (const auto& [series, value] : after) {
    if (!IsLabelledSeriesOf(series, name)) continue;
    const std::string tier = LabelValue(series.substr(name.size()), "tier");
    if (!tier.empty()) out[tier] += Delta(after, before, series);
  }
  return out;
}

json MakeMultiTurnReport(const MultiTurnOptions& options, const std::string& policy,
                         const MultiTurnResult& result, const std::map<std::string, double>& before,
                         const std::map<std::string, double>& after) {
  int64_t completed = 0, failed = 0, prompt_tokens = 0, output_tokens = 0, ideal = 0;
  int64_t cached = 0;
  std::vector<double> ttft_ms;
  // TTFT of the turns that reused every token the ideal counts, and of the others.
  std::vector<double> ttft_full_ms, ttft_partial_ms;
  json errors = json::array();
  for (const TurnOutcome& t : result.turns) {
    if (!t.ok) {
      ++failed;
      if (errors.size() < 5) errors.push_back(t.error);
      continue;
    }
    ++completed;
    prompt_tokens += t.prompt_tokens;
    output_tokens += t.output_tokens;
    ideal += t.ideal_reused_tokens;
    cached += t.cached_tokens;
    ttft_ms.push_back(absl::ToDoubleMilliseconds(t.ttft));
    (t.cached_tokens >= t.ideal_reused_tokens ? ttft_full_ms : ttft_partial_ms)
        .push_back(absl::ToDoubleMilliseconds(t.ttft));
  }
  const Percentiles ttft = Compute(ttft_ms);
  const auto ttft_of = [](const std::vector<double>& ms) {
    return json{{"turns", ms.size()}, {"p50", ms.empty() ? 0.0 : Compute(ms).p50}};
  };
  const double response_rate =
      Ratio(static_cast<double>(cached), static_cast<double>(prompt_tokens));
  const double wall_s = absl::ToDoubleSeconds(result.wall);
  const auto delta = [&](const std::string& series) { return Delta(after, before, series); };
  const double router_prompt = delta("lockstep_router_prompt_tokens_total");
  const double router_cached = delta("lockstep_router_prefix_cached_tokens_total");
  const double ideal_rate = Ratio(static_cast<double>(ideal), static_cast<double>(prompt_tokens));
  const double hit_rate = Ratio(router_cached, router_prompt);
  json decisions = json::object();
  for (const char* reason : {"prefix", "load", "round_robin"}) {
    decisions[reason] =
        delta(absl::StrFormat("lockstep_router_routing_decisions_total{reason=\"%s\"}", reason));
  }
  double worker_prompt = 0, worker_reused = 0;
  json ranks = json::array();
  for (const RankReuse& rank : WorkerReuse(before, after)) {
    worker_prompt += rank.prompt_tokens;
    worker_reused += rank.reused_tokens;
    ranks.push_back({{"instance", rank.instance},
                     {"rank", rank.rank},
                     {"prompt_tokens", rank.prompt_tokens},
                     {"reused_tokens", rank.reused_tokens},
                     {"hit_rate", Ratio(rank.reused_tokens, rank.prompt_tokens)}});
  }
  const double worker_rate = Ratio(worker_reused, worker_prompt);
  json tiers = json::object();
  for (const auto& [tier, tokens] : TierHits(before, after)) {
    tiers[tier] = {{"reused_tokens", tokens}, {"hit_rate", Ratio(tokens, worker_prompt)}};
  }
  json hints = json::object();
  for (const char* outcome : {"honoured", "overridden"}) {
    hints[outcome] =
        delta(absl::StrFormat("lockstep_router_rank_hints_total{outcome=\"%s\"}", outcome));
  }
  return json{
      {"workload", "multi-turn"},
      {"policy", policy},
      {"seed", options.seed},
      {"users", options.users},
      {"concurrency", options.concurrency},
      {"turns", {{"min", options.min_turns}, {"max", options.max_turns}}},
      {"system_tokens", options.system_tokens},
      {"mean_think_ms", absl::ToDoubleMilliseconds(options.mean_think)},
      {"user_tokens", {{"min", options.min_user_tokens}, {"max", options.max_user_tokens}}},
      {"output_tokens", {{"min", options.min_output_tokens}, {"max", options.max_output_tokens}}},
      {"requests", completed},
      {"failed", failed},
      {"errors", errors},
      {"wall_s", wall_s},
      {"prompt_tokens", prompt_tokens},
      {"generated_tokens", output_tokens},
      {"ideal_reused_tokens", ideal},
      {"ideal_hit_rate", ideal_rate},
      {"router_prompt_tokens", router_prompt},
      {"router_cached_tokens", router_cached},
      {"hit_rate", hit_rate},
      {"hit_rate_vs_ideal", Ratio(hit_rate, ideal_rate)},
      {"workers",
       {{"prompt_tokens", worker_prompt},
        {"reused_tokens", worker_reused},
        {"hit_rate", worker_rate},
        {"hit_rate_vs_ideal", Ratio(worker_rate, ideal_rate)},
        {"ranks", ranks},
        {"tiers", tiers}}},
      {"responses",
       {{"cached_tokens", cached},
        {"hit_rate", response_rate},
        {"hit_rate_vs_ideal", Ratio(response_rate, ideal_rate)}}},
      {"ttft_ms", {{"p50", ttft.p50}, {"p99", ttft.p99}}},
      {"ttft_ms_by_reuse",
       {{"full", ttft_of(ttft_full_ms)}, {"partial", ttft_of(ttft_partial_ms)}}},
      {"output_tokens_per_s", Ratio(static_cast<double>(output_tokens), wall_s)},
      {"requests_per_s", Ratio(static_cast<double>(completed), wall_s)},
      {"routing_decisions", decisions},
      {"rank_hints", hints},
      {"kv_resyncs", delta("lockstep_router_kv_resyncs_total")},
      {"paused_requests", FamilyDelta(after, before, kPausedRequests)},
  };
}

std::string FormatMultiTurnReport(const json& r) {
  std::string out = absl::StrFormat(
      "multi-turn, policy %s: %d users (%d at once), %d-%d turns, system prompt %d tokens, "
      "think %.0f ms, seed %d\n",
      r["policy"].get<std::string>(), r["users"].get<int64_t>(), r["concurrency"].get<int64_t>(),
      r["turns"]["min"].get<int64_t>(), r["turns"]["max"].get<int64_t>(),
      r["system_tokens"].get<int64_t>(), r["mean_think_ms"].get<double>(),
      r["seed"].get<uint64_t>());
  absl::StrAppendFormat(
      &out, "  requests        %d ok, %d failed in %.1f s (%.2f req/s); %.0f paused to make room\n",
      r["requests"].get<int64_t>(), r["failed"].get<int64_t>(), r["wall_s"].get<double>(),
      r["requests_per_s"].get<double>(), r.value("paused_requests", 0.0));
  absl::StrAppendFormat(
      &out,
      "  prefix hit rate %.1f%% (router: cached on the serving rank); ideal %.1f%%; %.1f%% "
      "of ideal\n",
      100 * r["hit_rate"].get<double>(), 100 * r["ideal_hit_rate"].get<double>(),
      100 * r["hit_rate_vs_ideal"].get<double>());
  const json& w = r["workers"];
  absl::StrAppendFormat(&out,
                        "  workers' reuse  %.1f%% of the %.0f prompt tokens their new caches "
                        "prefilled; %.1f%% of ideal;",
                        100 * w["hit_rate"].get<double>(), w["prompt_tokens"].get<double>(),
                        100 * w["hit_rate_vs_ideal"].get<double>());
  for (const json& rank : w["ranks"]) {
    if (rank["prompt_tokens"].get<double>() <= 0) continue;  // e.g. a generation instance
    absl::StrAppendFormat(&out, " %s/%s %.1f%% of %.0f", rank["instance"].get<std::string>(),
                          rank["rank"].get<std::string>(), 100 * rank["hit_rate"].get<double>(),
                          rank["prompt_tokens"].get<double>());
  }
  out += "\n";
  if (w.contains("tiers") && !w["tiers"].empty()) {
    out += "  hits by tier   ";
    for (const char* tier : {"device", "host", "disk"}) {
      if (!w["tiers"].contains(tier)) continue;
      const json& t = w["tiers"][tier];
      absl::StrAppendFormat(&out, " %s %.1f%% (%.0f tokens)", tier,
                            100 * t["hit_rate"].get<double>(), t["reused_tokens"].get<double>());
    }
    out += " of the workers' prompt tokens\n";
  }
  const json& responses = r["responses"];
  absl::StrAppendFormat(&out,
                        "  responses       %.1f%% of the prompt tokens reported cached "
                        "(usage cached_tokens); %.1f%% of ideal\n",
                        100 * responses["hit_rate"].get<double>(),
                        100 * responses["hit_rate_vs_ideal"].get<double>());
  absl::StrAppendFormat(&out, "  TTFT            p50 %.1f ms, p99 %.1f ms\n",
                        r["ttft_ms"]["p50"].get<double>(), r["ttft_ms"]["p99"].get<double>());
  const json& by_reuse = r["ttft_ms_by_reuse"];
  absl::StrAppendFormat(
      &out,
      "  TTFT by reuse   p50 %.1f ms over %d turns that reused all the ideal counts, %.1f ms "
      "over %d that recomputed part of it\n",
      by_reuse["full"]["p50"].get<double>(), by_reuse["full"]["turns"].get<int64_t>(),
      by_reuse["partial"]["p50"].get<double>(), by_reuse["partial"]["turns"].get<int64_t>());
  absl::StrAppendFormat(&out, "  throughput      %.1f output tokens/s\n",
                        r["output_tokens_per_s"].get<double>());
  absl::StrAppendFormat(
      &out,
      "  routing         prefix %.0f, load %.0f, round_robin %.0f; rank hints honoured %.0f, "
      "overridden %.0f; resyncs %.0f\n",
      r["routing_decisions"]["prefix"].get<double>(), r["routing_decisions"]["load"].get<double>(),
      r["routing_decisions"]["round_robin"].get<double>(),
      r["rank_hints"]["honoured"].get<double>(), r["rank_hints"]["overridden"].get<double>(),
      r["kv_resyncs"].get<double>());
  for (const json& e : r["errors"])
    absl::StrAppendFormat(&out, "  error: %s\n", e.get<std::string>());
  return out;
}

json CompareMultiTurn(const json& baseline, const json& candidate) {
  const auto pair = [&](const json& a, const json& b) {
    return json{{"baseline", a}, {"candidate", b}};
  };
  return json{
      {"baseline", baseline["policy"]},
      {"candidate", candidate["policy"]},
      {"hit_rate", pair(baseline["hit_rate"], candidate["hit_rate"])},
      {"workers_hit_rate", pair(baseline["workers"]["hit_rate"], candidate["workers"]["hit_rate"])},
      {"ideal_hit_rate", candidate["ideal_hit_rate"]},
      {"candidate_hit_rate_vs_ideal", candidate["hit_rate_vs_ideal"]},
      {"candidate_workers_hit_rate_vs_ideal", candidate["workers"]["hit_rate_vs_ideal"]},
      {"ttft_p50_ms", pair(baseline["ttft_ms"]["p50"], candidate["ttft_ms"]["p50"])},
      {"ttft_p99_ms", pair(baseline["ttft_ms"]["p99"], candidate["ttft_ms"]["p99"])},
      {"ttft_p50_speedup",
       Ratio(baseline["ttft_ms"]["p50"].get<double>(), candidate["ttft_ms"]["p50"].get<double>())},
      {"ttft_p99_speedup",
       Ratio(baseline["ttft_ms"]["p99"].get<double>(), candidate["ttft_ms"]["p99"].get<double>())},
      {"throughput_ratio", Ratio(candidate["output_tokens_per_s"].get<double>(),
                                 baseline["output_tokens_per_s"].get<double>())},
  };
}

std::string FormatComparison(const json& c) {
  return absl::StrFormat(
      "%s vs %s: hit rate %.1f%% vs %.1f%% (ideal %.1f%%, %s reaches %.1f%% of it), by the "
      "workers' counters %.1f%% vs %.1f%% (%.1f%% of ideal); TTFT p50 %.1f vs %.1f ms (%.2fx), "
      "p99 %.1f vs %.1f ms (%.2fx); throughput %.2fx\n",
      c["candidate"].get<std::string>(), c["baseline"].get<std::string>(),
      100 * c["hit_rate"]["candidate"].get<double>(), 100 * c["hit_rate"]["baseline"].get<double>(),
      100 * c["ideal_hit_rate"].get<double>(), c["candidate"].get<std::string>(),
      100 * c["candidate_hit_rate_vs_ideal"].get<double>(),
      100 * c["workers_hit_rate"]["candidate"].get<double>(),
      100 * c["workers_hit_rate"]["baseline"].get<double>(),
      100 * c["candidate_workers_hit_rate_vs_ideal"].get<double>(),
      c["ttft_p50_ms"]["candidate"].get<double>(), c["ttft_p50_ms"]["baseline"].get<double>(),
      c["ttft_p50_speedup"].get<double>(), c["ttft_p99_ms"]["candidate"].get<double>(),
      c["ttft_p99_ms"]["baseline"].get<double>(), c["ttft_p99_speedup"].get<double>(),
      c["throughput_ratio"].get<double>());
}

}  // namespace lockstep::bench
