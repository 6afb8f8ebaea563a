#include "tools/bench/request_drafts.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/host_port.h"
#include "httplib.h"

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

absl::StatusOr<std::string> ReadMetricsText(const std::string& http_address,
                                            const std::string& api_key) {
  const HostPort router = ParseHostPort(http_address).value_or(HostPort{http_address, 0});
  httplib::Client client(router.host, router.port);
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(5));
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  const httplib::Result result = client.Get("/metrics", headers);
  if (!result) {
    return absl::UnavailableError(absl::StrCat("GET /metrics on ", http_address, ": ",
                                               httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET /metrics on ", http_address, ": HTTP ", result->status));
  }
  return result->body;
}

absl::StatusOr<std::map<std::string, RequestDrafts>> ReadRequestDrafts(
    const std::string& http_address, const std::string& api_key) {
  absl::StatusOr<std::string> text = ReadMetricsText(http_address, api_key);
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
