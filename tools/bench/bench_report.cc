#include "tools/bench/bench_report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lockstep::bench {

using nlohmann::json;

namespace {

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// {"ngram": {"proposed": P, "accepted": A, "acceptance": A / P}, ...}
json MethodsJson(const std::map<std::string, DraftCounts>& by_method) {
  json out = json::object();
  for (const auto& [method, d] : by_method) {
    out[method] = {{"proposed", d.proposed},
                   {"accepted", d.accepted},
                   {"acceptance", Ratio(static_cast<double>(d.accepted),
                                        static_cast<double>(d.proposed))}};
  }
  return out;
}

// The mean K of the steps counted by K.
double MeanK(const std::vector<int64_t>& steps) {
  double n = 0, sum = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    n += static_cast<double>(steps[k]);
    sum += static_cast<double>(k) * static_cast<double>(steps[k]);
  }
  return Ratio(sum, n);
}

// "0:12 3:100 (mean 2.68)": the K that ran, with their steps.
std::string FormatKSteps(const json& steps, double mean) {
  std::string out;
  for (size_t k = 0; k < steps.size(); ++k) {
    if (steps[k].get<int64_t>() > 0) absl::StrAppend(&out, k, ":", steps[k].get<int64_t>(), " ");
  }
  absl::StrAppendFormat(&out, "(mean %.2f)", mean);
  return out;
}

// "3:1.2 4:5.0 (mean of 12 samples)": the K that held requests, with their mean count.
std::string FormatKRequests(const json& mean, int64_t samples) {
  std::string out;
  for (size_t k = 0; k < mean.size(); ++k) {
    if (mean[k].get<double>() > 0)
      absl::StrAppendFormat(&out, "%d:%.1f ", k, mean[k].get<double>());
  }
  absl::StrAppendFormat(&out, "(mean of %d samples)", samples);
  return out;
}

// {"acceptance": [a1, a2, ...], "mean_accepted_length": L}: acceptance at each draft
// position and the tokens a verifying step emits on average (1 plus its accepted
// drafts); empty before a draft was verified.
json PositionsJson(const std::vector<int64_t>& proposed, const std::vector<int64_t>& accepted) {
  json out = json::object();
  const size_t n = std::min(proposed.size(), accepted.size());
  if (n == 0 || proposed[0] <= 0) return out;
  std::vector<double> acceptance;
  double accepted_sum = 0;
  for (size_t j = 0; j < n; ++j) {
    acceptance.push_back(
        Ratio(static_cast<double>(accepted[j]), static_cast<double>(proposed[j])));
    accepted_sum += static_cast<double>(accepted[j]);
  }
  out["acceptance"] = acceptance;
  out["mean_accepted_length"] = 1 + accepted_sum / static_cast<double>(proposed[0]);
  return out;
}

// "1:64.9% 2:40.0% 3:25.0%; mean accepted length 2.15"
std::string FormatPositions(const json& positions) {
  std::string out;
  const json& acceptance = positions["acceptance"];
  for (size_t j = 0; j < acceptance.size(); ++j) {
    absl::StrAppendFormat(&out, "%d:%.1f%% ", j + 1, 100.0 * acceptance[j].get<double>());
  }
  absl::StrAppendFormat(&out, "(mean accepted length %.2f)",
                        positions["mean_accepted_length"].get<double>());
  return out;
}

void AddTo(const std::vector<int64_t>& from, std::vector<int64_t>* to) {
  if (to->size() < from.size()) to->resize(from.size());
  for (size_t j = 0; j < from.size(); ++j) (*to)[j] += from[j];
}

}  // namespace

Percentiles Compute(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
    return values[std::min(i, values.size() - 1)];
  };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  return p;
}

json MakeReport(const LoadOptions& options, const LoadResult& result,
                const std::vector<InstanceDelta>& instances,
                const std::map<std::string, RequestDrafts>& request_drafts) {
  int64_t completed = 0, failed = 0, output_tokens = 0, prompt_tokens = 0;
  std::vector<double> ttft_ms, tpot_ms;
  std::vector<std::string> errors;
  for (const RequestOutcome& o : result.outcomes) {
    if (!o.ok) {
      ++failed;
      if (errors.size() < 5) errors.push_back(o.error);
      continue;
    }
    ++completed;
    output_tokens += o.output_tokens;
    prompt_tokens += o.prompt_tokens;
    ttft_ms.push_back(absl::ToDoubleMilliseconds(o.ttft));
    if (o.output_tokens > 1) {
      tpot_ms.push_back(absl::ToDoubleMilliseconds(o.latency - o.ttft) /
                        static_cast<double>(o.output_tokens - 1));
    }
  }
  const double seconds = std::max(1e-9, absl::ToDoubleSeconds(result.wall));
  const Percentiles ttft = Compute(ttft_ms);
  const Percentiles tpot = Compute(tpot_ms);
  json report = {
      {"requests", static_cast<int64_t>(result.outcomes.size())},
      {"completed", completed},
      {"failed", failed},
      {"concurrency", options.concurrency},
      {"workload", WorkloadName(options.workload)},
      {"wall_s", seconds},
      {"requests_per_s", static_cast<double>(completed) / seconds},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", output_tokens},
      {"output_tokens_per_s", static_cast<double>(output_tokens) / seconds},
      {"ttft_ms", {{"p50", ttft.p50}, {"p99", ttft.p99}}},
      {"tpot_ms", {{"p50", tpot.p50}, {"p99", tpot.p99}}},
      {"errors", errors},
  };
  json per_instance = json::array();
  int64_t proposed = 0, accepted = 0, kv_bytes = 0;
  double kv_seconds = 0;
  std::map<std::string, DraftCounts> by_method;
  std::vector<int64_t> k_steps;
  std::vector<double> k_requests;  // summed over instances: the deployment's mean
  int64_t k_request_samples = 0;   // the fewest any sampled instance had
  std::vector<int64_t> position_proposed, position_accepted;
  for (const InstanceDelta& i : instances) {
    per_instance.push_back(
        {{"name", i.name},
         {"role", i.role},
         {"steps", i.steps},
         {"vetoed_steps", i.vetoed_steps},
         {"vetoed_per_1000_steps",
          i.steps > 0 ? 1000.0 * static_cast<double>(i.vetoed_steps) / static_cast<double>(i.steps)
                      : 0.0},
         {"padded_steps", i.padded_steps},
         {"generated_tokens", i.generated_tokens},
         {"tokens_per_step", i.steps > 0 ? static_cast<double>(i.generated_tokens) /
                                               static_cast<double>(i.steps)
                                         : 0.0},
         // Per sequence: a sequence step emits its accepted drafts plus one token.
         {"tokens_per_sequence_step",
          i.generated_tokens > i.drafts_accepted
              ? static_cast<double>(i.generated_tokens) /
                    static_cast<double>(i.generated_tokens - i.drafts_accepted)
              : 0.0},
         {"speculative", i.speculative},
         {"draft_tokens_proposed", i.drafts_proposed},
         {"draft_tokens_accepted", i.drafts_accepted},
         {"draft_acceptance", i.drafts_proposed > 0 ? static_cast<double>(i.drafts_accepted) /
                                                          static_cast<double>(i.drafts_proposed)
                                                    : 0.0},
         {"drafts_by_method", MethodsJson(i.drafts_by_method)},
         {"draft_k_steps", i.draft_k_steps},
         {"mean_k", MeanK(i.draft_k_steps)},
         {"draft_positions", PositionsJson(i.draft_position_proposed, i.draft_position_accepted)}});
    AddTo(i.draft_position_proposed, &position_proposed);
    AddTo(i.draft_position_accepted, &position_accepted);
    if (i.draft_k_request_samples > 0) {
      per_instance.back()["draft_k_requests"] = {{"samples", i.draft_k_request_samples},
                                                 {"mean", i.mean_draft_k_requests}};
      if (k_requests.size() < i.mean_draft_k_requests.size()) {
        k_requests.resize(i.mean_draft_k_requests.size());
      }
      for (size_t k = 0; k < i.mean_draft_k_requests.size(); ++k) {
        k_requests[k] += i.mean_draft_k_requests[k];
      }
      k_request_samples = k_request_samples == 0
                              ? i.draft_k_request_samples
                              : std::min(k_request_samples, i.draft_k_request_samples);
    }
    for (const auto& [method, d] : i.drafts_by_method) {
      by_method[method].proposed += d.proposed;
      by_method[method].accepted += d.accepted;
    }
    if (k_steps.size() < i.draft_k_steps.size()) k_steps.resize(i.draft_k_steps.size());
    for (size_t k = 0; k < i.draft_k_steps.size(); ++k) k_steps[k] += i.draft_k_steps[k];
    proposed += i.drafts_proposed;
    accepted += i.drafts_accepted;
    kv_bytes += i.kv_bytes_received;
    kv_seconds += i.kv_receive_seconds;
  }
  report["instances"] = per_instance;
  report["draft_acceptance"] =
      proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0;
  report["drafts_by_method"] = MethodsJson(by_method);
  report["draft_k_steps"] = k_steps;
  report["mean_k"] = MeanK(k_steps);
  report["draft_positions"] = PositionsJson(position_proposed, position_accepted);
  if (k_request_samples > 0) {
    report["draft_k_requests"] = {{"samples", k_request_samples}, {"mean", k_requests}};
  }
  json per_request = json::object();
  for (const auto& [method, r] : request_drafts) {
    per_request[method] = {
        {"requests", r.requests},
        {"mean_acceptance", Ratio(r.acceptance_sum, static_cast<double>(r.requests))}};
  }
  report["request_drafts"] = per_request;
  report["kv_transfer_bytes"] = kv_bytes;
  report["kv_transfer_gb_per_s"] =
      kv_seconds > 0 ? static_cast<double>(kv_bytes) / kv_seconds / 1e9 : 0.0;
  return report;
}

std::string FormatReport(const json& r) {
  std::string out = absl::StrFormat(
      "requests %d: completed %d, failed %d (concurrency %d, %.1f s)\n"
      "  throughput   %.2f req/s, %.1f output tokens/s\n"
      "  TTFT         p50 %.1f ms, p99 %.1f ms\n"
      "  TPOT         p50 %.1f ms, p99 %.1f ms\n",
      r["requests"].get<int64_t>(), r["completed"].get<int64_t>(), r["failed"].get<int64_t>(),
      r["concurrency"].get<int64_t>(), r["wall_s"].get<double>(), r["requests_per_s"].get<double>(),
      r["output_tokens_per_s"].get<double>(), r["ttft_ms"]["p50"].get<double>(),
      r["ttft_ms"]["p99"].get<double>(), r["tpot_ms"]["p50"].get<double>(),
      r["tpot_ms"]["p99"].get<double>());
  for (const json& i : r["instances"]) {
    absl::StrAppendFormat(&out, "  %-12s %-10s %d steps, %d vetoed (%.1f per 1000), %d padded\n",
                          i["name"].get<std::string>(), i["role"].get<std::string>(),
                          i["steps"].get<int64_t>(), i["vetoed_steps"].get<int64_t>(),
                          i["vetoed_per_1000_steps"].get<double>(),
                          i["padded_steps"].get<int64_t>());
    if (i.contains("tokens_per_step")) {
      const std::string spec = i.value("speculative", std::string());
      absl::StrAppendFormat(&out,
                            "  %-12s %.3f tokens per step (%.3f per sequence step); drafts %s%d "
                            "of %d accepted\n",
                            "", i["tokens_per_step"].get<double>(),
                            i["tokens_per_sequence_step"].get<double>(),
                            spec.empty() ? "" : absl::StrCat("(", spec, ") "),
                            i["draft_tokens_accepted"].get<int64_t>(),
                            i["draft_tokens_proposed"].get<int64_t>());
    }
    if (!i.value("drafts_by_method", json::object()).empty()) {
      absl::StrAppendFormat(&out, "  %-12s K per sequence step %s\n", "",
                            FormatKSteps(i["draft_k_steps"], i["mean_k"].get<double>()));
      if (!i.value("draft_positions", json::object()).empty()) {
        absl::StrAppendFormat(&out, "  %-12s acceptance by position %s\n", "",
                              FormatPositions(i["draft_positions"]));
      }
      if (i.contains("draft_k_requests")) {
        absl::StrAppendFormat(&out, "  %-12s requests by current K %s\n", "",
                              FormatKRequests(i["draft_k_requests"]["mean"],
                                              i["draft_k_requests"]["samples"].get<int64_t>()));
      }
    }
  }
  absl::StrAppendFormat(&out, "  drafts       %.1f%% accepted\n",
                        100.0 * r["draft_acceptance"].get<double>());
  const json by_method = r.value("drafts_by_method", json::object());
  const json per_request = r.value("request_drafts", json::object());
  for (const auto& item : by_method.items()) {
    const std::string& method = item.key();
    const json& d = item.value();
    absl::StrAppendFormat(&out, "  %-12s %d of %d accepted (%.1f%%)", method,
                          d["accepted"].get<int64_t>(), d["proposed"].get<int64_t>(),
                          100.0 * d["acceptance"].get<double>());
    if (per_request.contains(method)) {
      absl::StrAppendFormat(&out, "; per request %.1f%% mean over %d requests",
                            100.0 * per_request[method]["mean_acceptance"].get<double>(),
                            per_request[method]["requests"].get<int64_t>());
    }
    absl::StrAppend(&out, "\n");
  }
  if (!by_method.empty()) {
    absl::StrAppendFormat(&out, "  K steps      %s\n",
                          FormatKSteps(r["draft_k_steps"], r["mean_k"].get<double>()));
    if (!r.value("draft_positions", json::object()).empty()) {
      absl::StrAppendFormat(&out, "  by position  %s\n", FormatPositions(r["draft_positions"]));
    }
    if (r.contains("draft_k_requests")) {
      absl::StrAppendFormat(&out, "  K requests   %s\n",
                            FormatKRequests(r["draft_k_requests"]["mean"],
                                            r["draft_k_requests"]["samples"].get<int64_t>()));
    }
  }
  if (r["kv_transfer_bytes"].get<int64_t>() > 0) {
    absl::StrAppendFormat(&out, "  KV transfer  %.1f MB at %.3f GB/s\n",
                          static_cast<double>(r["kv_transfer_bytes"].get<int64_t>()) / 1e6,
                          r["kv_transfer_gb_per_s"].get<double>());
  }
  for (const json& e : r["errors"]) absl::StrAppend(&out, "  error: ", e.get<std::string>(), "\n");
  return out;
}

}  // namespace lockstep::bench
