#include "tools/bench/request_drafts.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tools/bench/metrics_text.h"

namespace lockstep::bench {

std::map<std::string, RequestDrafts> ParseRequestDrafts(absl::string_view metrics_text) {
  std::map<std::string, RequestDrafts> out;
  for (absl::string_view line : absl::StrSplit(metrics_text, '\n')) {
    if (!absl::ConsumePrefix(&line, "lockstep_router_request_draft_acceptance_")) continue;
    const bool is_sum = absl::ConsumePrefix(&line, "sum{method=\"");
    if (!is_sum && !absl::ConsumePrefix(&line, "count{method=\"")) continue;
    const size_t end = line.find("\"} ");
    if (end == absl::string_view::npos) continue;
    const std::string method(line.substr(0, end));
    double value = 0;
    if (!absl::SimpleAtod(line.substr(end + 3), &value)) continue;
    if (is_sum) {
      out[method].acceptance_sum = value;
    } else {
      out[method].requests = static_cast<int64_t>(value);
    }
  }
  return out;
}

absl::StatusOr<std::map<std::string, RequestDrafts>> ReadRequestDrafts(
    const std::string& http_address, const std::string& api_key, const std::string& ca_file) {
  absl::StatusOr<std::string> text = FetchMetrics(http_address, api_key, ca_file);
  if (!text.ok()) return text.status();
  return ParseRequestDrafts(*text);
}

std::map<std::string, RequestDrafts> RequestDraftsSince(
    const std::map<std::string, RequestDrafts>& after,
    const std::map<std::string, RequestDrafts>& before) {
  std::map<std::string, RequestDrafts> out;
  for (const auto& [method, a] : after) {
    RequestDrafts d = a;
    if (auto b = before.find(method); b != before.end()) {
      d.requests -= b->second.requests;
      d.acceptance_sum -= b->second.acceptance_sum;
    }
    if (d.requests > 0) out[method] = d;
  }
  return out;
}

}  // namespace lockstep::bench
