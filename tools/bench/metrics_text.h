// The router's /metrics as the bench reads it: fetched over HTTP (with the API key when
// given) and, for counters and gauges, as a map from the sample's series (its name and
// labels exactly as rendered, e.g. `lockstep_router_rank_hints_total{outcome="honoured"}`)
// to its value.
#ifndef LOCKSTEP_TOOLS_BENCH_METRICS_TEXT_H_
#define LOCKSTEP_TOOLS_BENCH_METRICS_TEXT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockstep::bench {

// GET /metrics of the router at `http_address` ("host:port" or an http:// or https://
// URL; an HTTPS router's certificate is checked against `ca_file`, empty: the system's
// CAs); UNAVAILABLE naming it on failure.
absl::StatusOr<std::string> FetchMetrics(const std::string& http_address,
                                         const std::string& api_key,
                                         const std::string& ca_file = "");

// Every sample line of Prometheus text; comments and malformed lines are skipped.
std::map<std::string, double> ParseSamples(absl::string_view metrics_text);

// samples[series] - before[series], a missing sample counting 0.
double Delta(const std::map<std::string, double>& after,
             const std::map<std::string, double>& before, const std::string& series);

// Whether `series` is a sample of metric `name` with labels: `name{...}`.
bool IsLabelledSeriesOf(absl::string_view series, absl::string_view name);

// The same summed over every series of the metric `name` (the bare name and each of its
// label sets: `name{...}`), e.g. a per-instance counter over the whole deployment.
double FamilyDelta(const std::map<std::string, double>& after,
                   const std::map<std::string, double>& before, absl::string_view name);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_METRICS_TEXT_H_
