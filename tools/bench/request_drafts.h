// Per-request speculation as the router's /metrics reports it: by method, the count and
// the sum of lockstep_router_request_draft_acceptance, one sample per finished request
// that proposed drafts (runtime/router/core/router_metrics.h).
#ifndef LOCKSTEP_TOOLS_BENCH_REQUEST_DRAFTS_H_
#define LOCKSTEP_TOOLS_BENCH_REQUEST_DRAFTS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tools/bench/bench_report.h"

namespace lockstep::bench {

// From Prometheus text; lines of other families are ignored.
std::map<std::string, RequestDrafts> ParseRequestDrafts(absl::string_view metrics_text);

// GET /metrics of the router at `http_address` (host:port or an http(s):// URL; an
// HTTPS router's certificate checked against `ca_file`), with the API key when given.
absl::StatusOr<std::map<std::string, RequestDrafts>> ReadRequestDrafts(
    const std::string& http_address, const std::string& api_key, const std::string& ca_file);

// after - before, per method present in `after`.
std::map<std::string, RequestDrafts> RequestDraftsSince(
    const std::map<std::string, RequestDrafts>& after,
    const std::map<std::string, RequestDrafts>& before);

}  // namespace lockstep::bench

#endif  // LOCKSTEP_TOOLS_BENCH_REQUEST_DRAFTS_H_
